package config_test

import (
	"errors"
	"fmt"

	"github.com/inferrail/inferrail/config"
)

func ExampleParse() {
	doc := []byte(`
models:
  - name: inferrail/sim-8b
    aliases: [sim]
replicas:
  - id: sim-0
    url: http://127.0.0.1:8001
    models: [inferrail/sim-8b]
routing:
  split: {cost_model: 90, kv_aware: 10}
`)
	c, err := config.Parse(doc, []string{"INFERRAIL_SERVER__LISTEN=0.0.0.0:8080", "HOME=/root"})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ := c.Model("sim")
	r := c.RoutingFor(m)
	fmt.Println(c.Server.Listen, c.Server.ReloadInterval, m.Name, r.Split["cost_model"])
	// Output: 0.0.0.0:8080 2s inferrail/sim-8b 90
}

func ExampleKeyError() {
	_, err := config.Parse([]byte(`
models: [{name: m}]
replicas:
  - {id: r, url: "ftp://h", models: [m], max_concurency: 8}
health: {interval: 5}
`), nil)
	fmt.Println(err)
	var ke *config.KeyError
	if errors.As(err, &ke) {
		fmt.Println("first key:", ke.Key)
	}
	// Output:
	// health.interval: 5 is a bare number: a duration needs a unit, such as "5s" or "5ms"
	// replicas[0].max_concurency: unknown key
	// replicas[0].url: "ftp://h": want an http or https URL, such as http://127.0.0.1:8000
	// first key: health.interval
}

package health

import (
	"encoding/json"
	"testing"
)

// FuzzParseModels: any body either fails or yields cards that are valid JSON
// objects whose id is their key.
func FuzzParseModels(f *testing.F) {
	f.Add([]byte(modelList))
	f.Add([]byte(`{"data":[{"id":"a"},{"id":7},"x",{"id":""}]}`))
	f.Add([]byte(`{"data":null}`))
	f.Add([]byte(`{"data":[{"id":"a","id":"b"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		cards, err := parseModels(body)
		if err != nil {
			return
		}
		for id, raw := range cards {
			var c struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(raw, &c); err != nil || c.ID != id {
				t.Fatalf("card %q under %q: id %q, %v", raw, id, c.ID, err)
			}
		}
	})
}

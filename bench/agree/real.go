package agree

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/workload"
)

// RealOptions configures the real-time matrix (issue 17): for each workload
// and each instance count, with KV events and without, that many gateway
// processes in front of three fresh simulators, a client spreading the
// workload's requests over them round robin.
type RealOptions struct {
	// Start starts one gateway process serving the config file at path;
	// StartGateway with Bin by default.
	Start func(ctx context.Context, path string) (*loadgen.Proc, error)
	Bin   string
	// Points are the workloads by name (workload.New); Instances the
	// gateway counts, the first the control.
	Points    []string
	Instances []int
	// Requests is how many of the workload's first requests each cell
	// sends, in the workload's order, Rate a second whatever their due
	// times (so conversations and agent loops come back within seconds,
	// not their think times); the first WarmUp are left out of the
	// figures.
	Requests, WarmUp int
	Rate             float64
	// MaxTokens caps each request's max_tokens.
	MaxTokens int
	// Rendezvous also runs every cell with routing.cold_rendezvous.
	Rendezvous bool
	Seed       uint64
	Log        io.Writer
}

// RealRow is one cell of the real-time matrix.
type RealRow struct {
	Point              string
	Events, Rendezvous bool
	Instances          int
	// HitRate is the engines' cached prompt tokens over the prompt tokens
	// of the measured requests; Ratio that over the control's.
	HitRate, Ratio float64
	// Disagreement is the share of (request, other instance) pairs where
	// the other instance's POST /admin/explain, asked just before the
	// request was sent, named another replica than the one that served it
	// (x-inferrail-replica). Exact is the share of predictions
	// (x-inferrail-cached-tokens) equal to the engine's hit.
	Disagreement, Exact float64
	P99TTFT             time.Duration
	Requests, Failed    int
}

// Real runs the real-time matrix and returns its rows, in the order of the
// points, cold rendezvous (off, then on), events (off, then on) and
// instance counts.
func Real(ctx context.Context, o RealOptions) ([]RealRow, error) {
	if o.Requests <= o.WarmUp || o.Rate <= 0 || len(o.Instances) == 0 {
		return nil, fmt.Errorf("real-time matrix: want requests > warm-up, rate > 0 and an instance count")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Start == nil {
		o.Start = func(ctx context.Context, path string) (*loadgen.Proc, error) { return StartGateway(ctx, o.Bin, path) }
	}
	var rows []RealRow
	for _, name := range o.Points {
		w, err := workload.New(name)
		if err != nil {
			return nil, err
		}
		src := w.Start(o.Seed, 7)
		reqs := make([]workload.Request, o.Requests)
		for i := range reqs {
			reqs[i] = src.Next()
			reqs[i].MaxTokens = max(min(reqs[i].MaxTokens, o.MaxTokens), 1)
		}
		rendezvous := []bool{false}
		if o.Rendezvous {
			rendezvous = append(rendezvous, true)
		}
		for _, rv := range rendezvous {
			for _, events := range []bool{false, true} {
				ctl := len(rows)
				for _, n := range o.Instances {
					row, err := realCell(ctx, o, reqs, n, events, rv)
					if err != nil {
						return nil, fmt.Errorf("%s, %d instances, events %v, cold rendezvous %v: %w", name, n, events, rv, err)
					}
					row.Point = name
					if rows = append(rows, row); rows[ctl].HitRate > 0 {
						rows[len(rows)-1].Ratio = row.HitRate / rows[ctl].HitRate
					}
					fmt.Fprintf(o.Log, "real-time matrix: %s events %v rendezvous %v instances %d: hit %.3f (%.3f×) disagreement %.3f p99 TTFT %v\n",
						name, events, rv, n, row.HitRate, rows[len(rows)-1].Ratio, row.Disagreement, row.P99TTFT.Round(time.Millisecond))
				}
			}
		}
	}
	return rows, nil
}

// realOutcome is what one request of a cell did.
type realOutcome struct {
	prompt, cached, predicted int
	replica                   string
	ttft                      time.Duration
	asked, disagreed          int
}

// realCell runs one cell: n gateways on three fresh simulators.
func realCell(ctx context.Context, o RealOptions, reqs []workload.Request, n int, events, rendezvous bool) (RealRow, error) {
	row := RealRow{Events: events, Rendezvous: rendezvous, Instances: n}
	dir, err := os.MkdirTemp("", "inferrail-real-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(dir)
	opts := fastSimOptions(events)
	sims, err := sim.StartN(3, opts)
	if err != nil {
		return row, err
	}
	defer func() {
		for _, s := range sims {
			s.Close()
		}
	}()
	addrs, admins := make([]string, n), make([]string, n)
	var procs []*loadgen.Proc
	defer func() {
		for _, p := range procs {
			if p.Alive() {
				p.Stop()
			}
		}
	}()
	for k := range n {
		admin, err := freeAddr()
		if err != nil {
			return row, err
		}
		cfg, addr, err := killConfig(sims, opts, events, func(c *config.Config) {
			c.Server.AdminListen, c.Routing.ColdRendezvous = admin, rendezvous
		})
		if err != nil {
			return row, err
		}
		p, err := startConfigured(ctx, o.Start, dir, k, cfg, addr)
		if p != nil {
			procs = append(procs, p)
		}
		if err != nil {
			return row, err
		}
		if err := waitReady(ctx, "http://"+addr+"/v1/models"); err != nil {
			return row, err
		}
		addrs[k], admins[k] = addr, admin
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	outs := make([]realOutcome, len(reqs))
	var mu sync.Mutex
	res, err := loadgen.RunOpenLoop(ctx, loadgen.Schedule{Rate: o.Rate, N: len(reqs)}, func(ctx context.Context, i int) error {
		k := i % n
		path, body := realBody(opts.Model, &reqs[i])
		var others []string
		for j := range n {
			if j != k {
				w, err := explainWinner(ctx, client, admins[j], path, body, reqs[i].Session)
				if err != nil {
					return err
				}
				others = append(others, w)
			}
		}
		out, err := realSend(ctx, client, addrs[k], path, body, reqs[i].Session)
		if err != nil {
			return err
		}
		for _, w := range others {
			out.asked++
			if w != out.replica {
				out.disagreed++
			}
		}
		mu.Lock()
		outs[i] = out
		mu.Unlock()
		return nil
	})
	if err != nil {
		return row, err
	}
	var prompt, cached, asked, disagreed int
	var ttfts []time.Duration
	for i := o.WarmUp; i < len(reqs); i++ {
		if res.Errs[i] != nil {
			row.Failed++
			fmt.Fprintf(o.Log, "real-time matrix: request %d: %v\n", i, res.Errs[i])
			continue
		}
		r := &outs[i]
		row.Requests++
		prompt, cached = prompt+r.prompt, cached+r.cached
		asked, disagreed = asked+r.asked, disagreed+r.disagreed
		if r.predicted == r.cached {
			row.Exact++
		}
		ttfts = append(ttfts, r.ttft)
	}
	if prompt > 0 {
		row.HitRate = float64(cached) / float64(prompt)
	}
	if asked > 0 {
		row.Disagreement = float64(disagreed) / float64(asked)
	}
	if row.Requests > 0 {
		row.Exact /= float64(row.Requests)
	}
	row.P99TTFT = loadgen.Percentile(ttfts, 99)
	return row, nil
}

// realBody is r's endpoint and streamed JSON body, with usage.
func realBody(model string, r *workload.Request) (string, []byte) {
	req := map[string]any{"model": model, "max_tokens": r.MaxTokens, "stream": true,
		"stream_options": map[string]any{"include_usage": true}}
	path := "/v1/completions"
	if r.Chat() {
		path = "/v1/chat/completions"
		msgs := make([]map[string]string, len(r.Messages))
		for i, m := range r.Messages {
			msgs[i] = map[string]string{"role": m.Role, "content": m.Content}
		}
		req["messages"] = msgs
	} else {
		req["prompt"] = r.Prompt
	}
	b, _ := json.Marshal(req) // maps of strings and numbers always marshal
	return path, b
}

func post(ctx context.Context, client *http.Client, url string, body []byte, session string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("x-session-id", session)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: status %d: %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp, nil
}

// explainWinner is the replica the gateway at admin would route the
// request to (POST /admin/explain), changing nothing.
func explainWinner(ctx context.Context, client *http.Client, admin, path string, body []byte, session string) (string, error) {
	resp, err := post(ctx, client, "http://"+admin+"/admin/explain"+path, body, session)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct {
		Winner *string `json:"winner"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.Winner == nil {
		return "", fmt.Errorf("explain at %s: no winner (%v)", admin, err)
	}
	return *v.Winner, nil
}

// realSend streams one request through the gateway at addr and reads its
// time to first token, the engine's hit from the usage chunk and the
// gateway's replica and prediction from its headers.
func realSend(ctx context.Context, client *http.Client, addr, path string, body []byte, session string) (realOutcome, error) {
	out := realOutcome{predicted: -1}
	start := time.Now()
	resp, err := post(ctx, client, "http://"+addr+path, body, session)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	out.replica = resp.Header.Get("x-inferrail-replica")
	if h := resp.Header.Get("x-inferrail-cached-tokens"); h != "" {
		out.predicted, _ = strconv.Atoi(h)
	}
	rd, tally := loadgen.NewSSEReader(resp.Body), loadgen.NewStreamTally()
	for {
		_, data, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, err
		}
		content, err := tally.Add(data)
		if err != nil {
			return out, err
		}
		if content && out.ttft == 0 {
			out.ttft = time.Since(start)
		}
		var u struct {
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
				Details      *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if !tally.Done && json.Unmarshal(data, &u) == nil && u.Usage != nil {
			out.prompt = u.Usage.PromptTokens
			if u.Usage.Details != nil {
				out.cached = u.Usage.Details.CachedTokens
			}
		}
	}
	if !tally.Done || out.prompt == 0 {
		return out, fmt.Errorf("stream from %s ended without [DONE] or usage", addr)
	}
	return out, nil
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// WriteReal writes rows as a Markdown table.
func WriteReal(w io.Writer, rows []RealRow) error {
	if _, err := fmt.Fprintln(w, "| point | KV events | cold rendezvous | gateways | hit rate | × one gateway | pick disagreement | exact predictions | p99 TTFT | requests | failed |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"); err != nil {
		return err
	}
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "| %s | %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %v | %d | %d |\n",
			r.Point, onOff(r.Events), onOff(r.Rendezvous), r.Instances, r.HitRate, r.Ratio, r.Disagreement, r.Exact,
			r.P99TTFT.Round(time.Millisecond), r.Requests, r.Failed); err != nil {
			return err
		}
	}
	return nil
}

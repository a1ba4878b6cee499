package scrape

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/transport/sockio"
	"github.com/inferrail/inferrail/transport/upstream"
)

// Errors a scrape may wrap besides load.ErrUnreadable and the context's
// errors. Result classifies them all.
var (
	// ErrTooLarge: the page is longer than Options.MaxPageBytes.
	ErrTooLarge = errors.New("page over the size limit")
	// ErrStatus: the engine answered with a status other than 200.
	ErrStatus = errors.New("unexpected status")
)

// Options configure a Scraper. A zero field takes its default.
type Options struct {
	// MaxPageBytes is the longest page read (default 4 MiB). A page
	// announced longer is refused before its body is read, and one that
	// runs longer is refused once the limit is passed; either way its
	// connection is closed. vLLM's page is about 50 KB per DP rank.
	MaxPageBytes int64
	// IdleTimeout closes a keep-alive connection unused this long (default
	// 4s). vLLM's uvicorn closes keep-alive connections after 5 s
	// (VLLM_HTTP_TIMEOUT_KEEP_ALIVE); a replica scraped every 100 ms never
	// gets near it, and the connections of replicas that left are closed.
	IdleTimeout time.Duration
	// MaxHeaderBytes is the largest response head accepted (default
	// 64 KiB).
	MaxHeaderBytes int64
	// TLS reaches https:// engines (their CA bundle, a client
	// certificate); nil: the system's roots.
	TLS *tls.Config
}

// DefaultMaxPageBytes is the page limit of the reference ("Freshness").
const DefaultMaxPageBytes = 4 << 20

const (
	defaultIdleTimeout    = 4 * time.Second
	defaultMaxHeaderBytes = 64 << 10
	readBytes             = 32 << 10 // each read from the body, parsed at once
)

// Scraper fetches and parses engines' metrics pages. It is safe for
// concurrent use; one Scraper serves every replica of a gateway.
type Scraper struct {
	// pools hold a keep-alive transport/upstream.Pool per engine (by base
	// URL), whose requests run on the scraping goroutine itself; client
	// is net/http, for a base URL a Pool cannot serve (one with a path).
	client   *http.Client
	poolOpts upstream.Options
	mu       sync.Mutex
	pools    map[string]*enginePool
	swept    time.Time

	maxPage int64
	scratch sync.Pool // *scratch, one per scrape under way
}

// enginePool is one engine's Pool and when a scrape last took it; a pool
// nobody scraped for a keep-alive timeout (its replica left) is closed.
type enginePool struct {
	p    *upstream.Pool // nil: the base URL is net/http's
	used time.Time
}

// scratch is one scrape's read buffer and parser, kept between scrapes so
// that a scrape of a healthy engine allocates no page-sized memory.
type scratch struct {
	buf    []byte
	parser load.Parser
}

// New returns a Scraper. Close it when every scrape has returned.
func New(opts Options) *Scraper {
	if opts.MaxPageBytes <= 0 {
		opts.MaxPageBytes = DefaultMaxPageBytes
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = defaultIdleTimeout
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	s := &Scraper{
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:       nil, // engines are reached directly, whatever the environment says
				DialContext: sockio.Dialer(&net.Dialer{}),
				// One scrape at a time per replica: one idle connection
				// each, however many replicas.
				MaxIdleConns:        0,
				MaxIdleConnsPerHost: 2,
				IdleConnTimeout:     opts.IdleTimeout,
				// prometheus_client gzips when asked; the page is made
				// afresh for every scrape and a LAN carries 50 KB in
				// microseconds, so asking would only cost the engine CPU.
				DisableCompression:     true,
				MaxResponseHeaderBytes: opts.MaxHeaderBytes,
				TLSClientConfig:        opts.TLS,
				// The scrape's context bounds everything else.
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		// One scrape at a time per replica: two idle connections at most,
		// like net/http's above.
		poolOpts: upstream.Options{MaxIdleConns: 2, IdleTimeout: opts.IdleTimeout,
			MaxResponseHeaderBytes: min(opts.MaxHeaderBytes, 1<<20), TLS: opts.TLS},
		pools:   map[string]*enginePool{},
		maxPage: opts.MaxPageBytes,
	}
	s.scratch.New = func() any { return &scratch{buf: make([]byte, readBytes)} }
	return s
}

// Close closes the idle connections. Scrapes may still follow; they open
// new ones.
func (s *Scraper) Close() {
	s.mu.Lock()
	pools := s.pools
	s.pools = map[string]*enginePool{}
	s.mu.Unlock()
	for _, e := range pools {
		if e.p != nil {
			e.p.Close()
		}
	}
	s.client.CloseIdleConnections()
}

// pool is base's Pool, made on its first scrape; nil when base has a path
// (net/http scrapes it). Every idle timeout or so it closes the pools no
// scrape took for that long.
func (s *Scraper) pool(base string) *upstream.Pool {
	now := time.Now()
	s.mu.Lock()
	e := s.pools[base]
	if e == nil {
		// NewPool refuses a base URL with a path (nil: net/http's), and
		// one that is not http(s), which net/http then fails to scrape,
		// and the replica's scrape warning says so.
		p, _ := upstream.NewPool(base, s.poolOpts)
		e = &enginePool{p: p}
		s.pools[base] = e
	}
	e.used = now
	var stale []*upstream.Pool
	if idle := s.poolOpts.IdleTimeout; now.Sub(s.swept) > idle {
		s.swept = now
		for b, o := range s.pools {
			if now.Sub(o.used) > idle {
				delete(s.pools, b)
				if o.p != nil {
					stale = append(stale, o.p)
				}
			}
		}
	}
	s.mu.Unlock()
	for _, p := range stale {
		p.Close() // a scrape still holding one finishes; its connection is then closed
	}
	return e.p
}

// Scrape fetches GET {baseURL}/metrics within ctx and parses it. Errors wrap
// load.ErrUnreadable (the page is not a load report), ErrTooLarge, ErrStatus,
// the context's error when ctx ended first, or a network error; Result
// names them.
func (s *Scraper) Scrape(ctx context.Context, baseURL string) (load.Report, error) {
	base := strings.TrimRight(baseURL, "/")
	var r load.Report
	var err error
	if p := s.pool(base); p != nil {
		r, err = s.scrapePool(ctx, p)
	} else {
		r, err = s.scrape(ctx, base+"/metrics")
	}
	if err != nil {
		return load.Report{}, fmt.Errorf("scrape %s/metrics: %w", base, err)
	}
	return r, nil
}

// The request head of every scrape. The classic text format:
// prometheus_client serves OpenMetrics only when asked for it (SGLang's
// make_asgi_app negotiates; vLLM always sends text 0.0.4).
const (
	acceptText = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
	userAgent  = "inferrail-scrape"
)

// scrapePool is scrape over p: the request written and the page read on
// the calling goroutine, with no goroutine of net/http's between, and the
// socket calls raw (transport/sockio), so that scraping every replica ten
// times a second wakes no other thread.
func (s *Scraper) scrapePool(ctx context.Context, p *upstream.Pool) (load.Report, error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI("/metrics")
	req.Header.Set("Accept", acceptText)
	req.Header.Set("User-Agent", userAgent)
	resp, err := p.Do(ctx, req)
	if err != nil {
		return load.Report{}, netError(ctx, err)
	}
	// Closing a response whose body was not read to its end closes the
	// connection: that is how a page over the limit, or a scrape cut short,
	// ends.
	defer resp.Close()
	if resp.StatusCode() != http.StatusOK {
		return load.Report{}, fmt.Errorf("%w %d", ErrStatus, resp.StatusCode())
	}
	return s.parse(ctx, resp, resp.ContentLength())
}

// netError returns the context's error in place of err once ctx has ended:
// what failed then is the time (a hung or dribbling engine), whatever
// net/http saw of it.
func netError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (s *Scraper) scrape(ctx context.Context, url string) (load.Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return load.Report{}, err
	}
	req.Header.Set("Accept", acceptText)
	req.Header.Set("User-Agent", userAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return load.Report{}, netError(ctx, err)
	}
	// Closing a body that was not read to its end closes the connection:
	// that is how a page over the limit, or a scrape cut short, ends.
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return load.Report{}, fmt.Errorf("%w %d", ErrStatus, resp.StatusCode)
	}
	return s.parse(ctx, resp.Body, resp.ContentLength)
}

// parse reads and parses a page from body, whose head announced announced
// bytes (-1: unknown): one longer than the limit is refused unread, and
// one that runs past it is refused there.
func (s *Scraper) parse(ctx context.Context, body io.Reader, announced int64) (load.Report, error) {
	if announced > s.maxPage {
		return load.Report{}, fmt.Errorf("%w: %d bytes announced, limit %d", ErrTooLarge, announced, s.maxPage)
	}
	sc := s.scratch.Get().(*scratch)
	defer s.scratch.Put(sc)
	p := &sc.parser
	p.Reset()
	var n int64
	for {
		// Read one byte past the limit at most, to tell a page of exactly
		// the limit from a longer one.
		k, rerr := body.Read(sc.buf[:min(int64(len(sc.buf)), s.maxPage+1-n)])
		n += int64(k)
		if n > s.maxPage {
			return load.Report{}, fmt.Errorf("%w: limit %d", ErrTooLarge, s.maxPage)
		}
		if _, err := p.Write(sc.buf[:k]); err != nil {
			return load.Report{}, err // unreadable already: stop reading
		}
		if rerr == io.EOF {
			return p.Report()
		}
		if rerr != nil {
			return load.Report{}, netError(ctx, rerr)
		}
	}
}

// Result names how a scrape ended, for the result label of
// inferrail_load_scrapes_total: "ok", "unreadable", "too_large", "timeout",
// "cancelled", "status" or "error" (connection refused, reset, DNS, ...).
func Result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, load.ErrUnreadable):
		return "unreadable"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, ErrStatus):
		return "status"
	}
	return "error"
}

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

	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/transport/sockio"
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
	client  *http.Client
	maxPage int64
	scratch sync.Pool // *scratch, one per scrape under way
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
		maxPage: opts.MaxPageBytes,
	}
	s.scratch.New = func() any { return &scratch{buf: make([]byte, readBytes)} }
	return s
}

// Close closes the idle connections. Scrapes may still follow; they open
// new ones.
func (s *Scraper) Close() { s.client.CloseIdleConnections() }

// Scrape fetches GET {baseURL}/metrics within ctx and parses it. Errors wrap
// load.ErrUnreadable (the page is not a load report), ErrTooLarge, ErrStatus,
// the context's error when ctx ended first, or a network error; Result
// names them.
func (s *Scraper) Scrape(ctx context.Context, baseURL string) (load.Report, error) {
	url := strings.TrimRight(baseURL, "/") + "/metrics"
	r, err := s.scrape(ctx, url)
	if err != nil {
		return load.Report{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return r, nil
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
	// The classic text format: prometheus_client serves OpenMetrics only
	// when asked for it (SGLang's make_asgi_app negotiates; vLLM always
	// sends text 0.0.4).
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	req.Header.Set("User-Agent", "inferrail-scrape")
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
	if resp.ContentLength > s.maxPage {
		return load.Report{}, fmt.Errorf("%w: %d bytes announced, limit %d", ErrTooLarge, resp.ContentLength, s.maxPage)
	}

	sc := s.scratch.Get().(*scratch)
	defer s.scratch.Put(sc)
	p := &sc.parser
	p.Reset()
	var n int64
	for {
		// Read one byte past the limit at most, to tell a page of exactly
		// the limit from a longer one.
		k, rerr := resp.Body.Read(sc.buf[:min(int64(len(sc.buf)), s.maxPage+1-n)])
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

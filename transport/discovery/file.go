package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/actors/fleet"
)

// MaxFileBytes is the size of the largest endpoint file read, as llm-d's
// file discovery allows.
const MaxFileBytes = 1 << 20

// FileEndpoint is one entry of an endpoint file.
type FileEndpoint struct {
	Name      string            `yaml:"name"`
	Namespace string            `yaml:"namespace"`
	Address   netip.Addr        `yaml:"-"`
	Port      int               `yaml:"-"`
	Labels    map[string]string `yaml:"labels"`
}

// fileDoc is the file as YAML decodes it: address and port as written.
type fileDoc struct {
	Endpoints *[]struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Address   string            `yaml:"address"`
		Port      string            `yaml:"port"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"endpoints"`
}

// ParseFile reads an endpoint file in llm-d's file-discovery format (YAML,
// or JSON): endpoints: [{name, namespace, address, port, labels}], address
// an IPv4 address and port a number from 1 to 65535, written as a string
// ("8000") or not. A name is required, made of letters, digits, '.', '_'
// and '-' (it becomes the replica id), and unique. Keys it does not know
// are ignored, as newer files may carry more. A document without the
// endpoints key, an empty file included, is refused: "endpoints: []" is
// the empty set. The first problem is the
// error, naming its entry; a document over MaxFileBytes is refused before
// it is parsed.
func ParseFile(b []byte) ([]FileEndpoint, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("the file is larger than %d bytes", MaxFileBytes)
	}
	var doc fileDoc
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not an endpoint file: %w", err)
	}
	if doc.Endpoints == nil {
		// Most likely a file caught while it is rewritten in place,
		// truncated: taken for an empty set it would drain every
		// endpoint until the next look.
		return nil, errors.New("no endpoints list (an empty file, or one read while it was being written?); write endpoints: [] for none")
	}
	out := make([]FileEndpoint, 0, len(*doc.Endpoints))
	seen := make(map[string]int, len(*doc.Endpoints))
	for i, e := range *doc.Endpoints {
		at := fmt.Sprintf("endpoints[%d]", i)
		if err := checkName(e.Name); err != nil {
			return nil, fmt.Errorf("%s.name: %w", at, err)
		}
		if j, dup := seen[e.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q is endpoints[%d]'s too; names are replica ids", at, e.Name, j)
		}
		seen[e.Name] = i
		addr, err := netip.ParseAddr(e.Address)
		if err != nil || !addr.Is4() {
			return nil, fmt.Errorf("%s.address: %q is not an IPv4 address", at, e.Address)
		}
		port, err := strconv.Atoi(e.Port)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("%s.port: %q is not a port from 1 to 65535", at, e.Port)
		}
		out = append(out, FileEndpoint{Name: e.Name, Namespace: e.Namespace, Address: addr, Port: port, Labels: e.Labels})
	}
	return out, nil
}

// checkName checks a replica id: 1 to 253 letters, digits, '.', '_' and
// '-', as config checks replicas[].id.
func checkName(s string) error {
	if s == "" || len(s) > 253 {
		return errors.New("1 to 253 characters are required")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q may hold only letters, digits, '.', '_' and '-'", s)
		}
	}
	return nil
}

// DefaultPoll is how often a watched file is looked at.
const DefaultPoll = time.Second

// racyWindow is how long after a file's modification time a look reads it
// again even when its size and time look unchanged: a rewrite within the
// file system's timestamp granularity keeps both (git's "racy" index
// entries).
const racyWindow = 2 * time.Second

// File is one endpoint file as a discovery source. Its Run loop is the
// only goroutine touching it.
type File struct {
	path string
	tmpl Template
	rep  *Reporter
	now  func() time.Time

	// What the last look saw: the file's identity, size and time, when it
	// was read, and its bytes.
	info   os.FileInfo
	readAt time.Time
	ok     bool   // the version info describes was good
	last   []byte // the last good version
	good   bool   // some version was good
}

// NewFile returns the source for the endpoint file at path: its entries
// become endpoints of tmpl, named by their name, reported through rep.
func NewFile(path string, tmpl Template, rep *Reporter) *File {
	return &File{path: path, tmpl: tmpl, rep: rep, now: time.Now}
}

// Load reads the file once and passes its endpoints on; a file that cannot
// be read or parsed is reported and keeps the last good set. It reports
// whether it passed a set on.
func (f *File) Load() bool {
	st, err := os.Stat(f.path)
	if err != nil {
		f.rep.Fail("the endpoint file cannot be read", err)
		return false
	}
	if f.info != nil && os.SameFile(st, f.info) && st.ModTime().Equal(f.info.ModTime()) && st.Size() == f.info.Size() &&
		f.readAt.Sub(st.ModTime()) > racyWindow {
		if f.ok {
			f.rep.OK() // it was missing a moment, and is back unchanged
		}
		return false
	}
	b, err := readBounded(f.path)
	f.info, f.readAt, f.ok = st, f.now(), false
	if err != nil {
		f.rep.Fail("the endpoint file cannot be read", err)
		return false
	}
	if f.good && bytes.Equal(b, f.last) {
		f.ok = true
		f.rep.OK()
		return false
	}
	entries, err := ParseFile(b)
	if err != nil {
		f.rep.Fail("the endpoint file was written with an error", fmt.Errorf("%s: %w", f.path, err))
		return false
	}
	f.last, f.good, f.ok = b, true, true
	eps := make([]fleet.Endpoint, len(entries))
	for i, e := range entries {
		eps[i] = f.tmpl.Endpoint(e.Name, e.Address, e.Port, 0, e.Labels)
	}
	f.rep.Set(eps)
	f.rep.OK()
	return true
}

// readBounded reads the file at path up to one byte past MaxFileBytes:
// ParseFile refuses a larger one without the rest being read.
func readBounded(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
}

// Run looks at the file every poll (DefaultPoll when 0) until ctx ends,
// passing each new good version on. Call Load first for the first read.
//
// It polls the file's size, time and identity rather than subscribing to
// inotify: a new file renamed over the old one, an edit in place, and a
// Kubernetes ConfigMap volume's symlink swap (whose events name ..data,
// not the file) are all one stat away, on any file system, with no watch
// to re-arm after a rename.
func (f *File) Run(ctx context.Context, poll time.Duration) {
	if poll <= 0 {
		poll = DefaultPoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f.Load()
		}
	}
}

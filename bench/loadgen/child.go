package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// SimReadyLine is what `inferrail sim` prints once it serves (cmd/inferrail/sim.go).
var SimReadyLine = regexp.MustCompile(`^inferrail sim: serving .* on (http://\S+)$`)

// Proc is a child process that a benchmark started, so that its CPU time
// and memory can be read from /proc apart from the load generator's. It
// dies with the load generator (PR_SET_PDEATHSIG), so a killed benchmark
// leaves no process behind. Its methods are for the goroutine that started it.
type Proc struct {
	Name string
	Pid  int
	URL  string // the last submatch of the ready line, when there was one
	Bin  string
	Args []string

	cmd     *exec.Cmd
	output  LockedBuffer // stderr, and stdout when there is no ready line
	drained sync.WaitGroup
	exited  chan struct{} // closed when the process has been waited for
	waitErr error
}

// Command says how to start a child process.
type Command struct {
	Name string // for messages
	Bin  string
	Args []string
	Env  []string // KEY=value pairs added to this process's environment
	// Ready, when set, is a line the process prints on standard output once
	// it serves; its last submatch becomes Proc.URL.
	Ready *regexp.Regexp
}

// Start starts c. When c.Ready is set, it waits up to 10s for a line of
// standard output that matches it; otherwise it returns as soon as the
// process runs.
func Start(ctx context.Context, c Command) (*Proc, error) {
	name, ready := c.Name, c.Ready
	p := &Proc{Name: name, Bin: c.Bin, Args: c.Args, exited: make(chan struct{})}
	p.cmd = exec.Command(c.Bin, c.Args...)
	if len(c.Env) > 0 {
		p.cmd.Env = append(os.Environ(), c.Env...)
	}
	// The signal goes when the thread that forked the child exits; Go ends a
	// thread only when a goroutine locked to it returns without unlocking,
	// which nothing here does.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stderr = &p.output
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, c.Bin, err)
	}
	p.Pid = p.cmd.Process.Pid
	readyc := make(chan string, 1)
	p.drained.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ready == nil {
				p.output.Write(append(sc.Bytes(), '\n'))
				continue
			}
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case readyc <- m[len(m)-1]:
				default:
				}
			}
		}
		// Keep draining so the child never blocks on a full pipe.
		io.Copy(io.Discard, out)
	})
	go func() {
		p.drained.Wait() // Wait must not run before the pipe is drained
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if ready == nil {
		return p, nil
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case p.URL = <-readyc:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before it was ready: %v: %s", name, p.waitErr, p.output.String())
	case <-timeout.C:
		p.Stop()
		return nil, fmt.Errorf("%s printed no line matching %q within 10s", name, ready)
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
}

// StartSim starts `bin sim --host 127.0.0.1 --port 0 args...` and waits
// until its /health answers.
func StartSim(ctx context.Context, bin string, args ...string) (*Proc, error) {
	args = append([]string{"sim", "--host", "127.0.0.1", "--port", "0"}, args...)
	p, err := Start(ctx, Command{Name: "simulator", Bin: bin, Args: args, Ready: SimReadyLine})
	if err != nil {
		return nil, err
	}
	if err := WaitHealthy(ctx, p, p.URL+"/health", 5*time.Second); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// WaitHealthy polls url with GET until it answers 200, p exits or timeout
// passes.
func WaitHealthy(ctx context.Context, p *Proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-p.exited:
			t.Stop()
			return fmt.Errorf("%s exited: %v: %s", p.Name, p.waitErr, p.output.String())
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %s not healthy within %v: %w", p.Name, url, timeout, last)
		}
	}
}

// Sample reads the process's CPU time and memory from /proc.
func (p *Proc) Sample() (ProcSample, error) { return ReadProc(p.Pid) }

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill ends the process at once with SIGKILL, as a crash or an
// out-of-memory kill would, and waits for it. Unlike the other methods it may
// be called from any goroutine.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// Output is the head of what the process wrote to stderr (and, when it had
// no ready line, to stdout).
func (p *Proc) Output() string { return p.output.String() }

// Stop asks the process to shut down (SIGTERM), kills it after 5s, and
// waits for it. It returns an error if the process had already died, since
// then the benchmark's numbers are not to be trusted.
func (p *Proc) Stop() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s had exited: %v: %s", p.Name, p.waitErr, p.output.String())
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s ignored SIGTERM for 5s and was killed", p.Name)
	}
}

// LockedBuffer is an io.Writer safe for concurrent use, for a child's
// output. It keeps the first 64 KiB, where the lines that explain a failure are.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionflow/sessionflow/tool"
)

// clientVersion is the version the bridge announces in the MCP handshake.
const clientVersion = "1"

// deathWait bounds how long a failed call waits for its connection to end
// before it reports the failure anyway.
const deathWait = 5 * time.Second

// Meta keys of the _meta object sent with every tools/call.
const (
	MetaSessionID = "sessionflow/sessionId"
	MetaCallID    = "sessionflow/callId"
)

// server is one configured MCP server and its supervisor.
type server struct {
	name string
	cfg  ServerConfig
	opts Options
	log  *slog.Logger

	// ctx is cancelled by close; it bounds connection attempts.
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // a call asks a down server to try again
	done   chan struct{} // closed when the supervisor returned

	mu      sync.Mutex
	cur     *conn         // the live connection, nil while restarting
	changed chan struct{} // closed and replaced at every state change
	down    error         // set while the server is down
	closing bool
	started bool
	stopErr error // written by the supervisor before done is closed
}

// conn is one connection to a server: one process of a stdio server.
type conn struct {
	sess  *mcp.ClientSession
	cmd   *exec.Cmd // nil for an HTTP server
	since time.Time

	killOnce sync.Once
	dead     chan struct{} // closed when the connection ended
	exit     string        // why it ended, set before dead is closed
}

func newServer(name string, cfg ServerConfig, opts Options) *server {
	ctx, cancel := context.WithCancel(context.Background())
	return &server{
		name:    name,
		cfg:     cfg,
		opts:    opts,
		log:     opts.Logger.With("mcpServer", name),
		ctx:     ctx,
		cancel:  cancel,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
}

// start makes the first connection and lists the server's tools.
func (s *server) start(ctx context.Context) ([]*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	c, err := s.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrStart, s.name, err)
	}
	var tools []*mcp.Tool
	for t, err := range c.sess.Tools(ctx, nil) {
		if err != nil {
			_ = s.stop(c)
			return nil, fmt.Errorf("%w %q: listing tools: %w", ErrStart, s.name, err)
		}
		tools = append(tools, t)
	}
	s.mu.Lock()
	s.cur = c
	s.mu.Unlock()
	s.log.Info("MCP server connected", "tools", len(tools))
	return tools, nil
}

// run starts the supervisor of a started server.
func (s *server) run() {
	s.mu.Lock()
	s.started = true
	first := s.cur
	s.mu.Unlock()
	go s.supervise(first)
}

// connect starts the server (or opens the HTTP connection) and performs the
// initialize handshake.
func (s *server) connect(ctx context.Context) (*conn, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "sessionflow", Version: clientVersion},
		&mcp.ClientOptions{Logger: s.log, Capabilities: &mcp.ClientCapabilities{}})
	c := &conn{dead: make(chan struct{}), since: time.Now()}
	var transport mcp.Transport
	switch s.cfg.transport() {
	case TypeHTTP:
		hc := s.opts.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		if len(s.cfg.Headers) > 0 {
			hc = withHeaders(hc, s.cfg.Headers)
		}
		transport = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxRetries: -1}
	default:
		// The process outlives ctx (which bounds the handshake only); close
		// stops it.
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Dir = s.cfg.Dir
		cmd.Env = os.Environ()
		for k, v := range s.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &stderrLog{log: s.log}
		cmd.WaitDelay = s.opts.TerminateTimeout
		// Its own process group: a terminal's Ctrl-C reaches the worker,
		// which stops the server in order, and the processes the server
		// started end with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.cmd = cmd
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: s.opts.TerminateTimeout}
	}
	sess, err := client.Connect(ctx, transport, nil)
	if err != nil {
		if c.cmd != nil && c.cmd.Process != nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
		return nil, err
	}
	c.sess = sess
	go func() {
		werr := sess.Wait()
		c.exit = s.describeExit(c, werr)
		if c.cmd != nil {
			// The processes the server started end with it.
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		}
		close(c.dead)
	}()
	return c, nil
}

// kill closes the connection; for a stdio server that stops the process.
// The SDK's close waits for the calls in flight, so it runs apart.
func (c *conn) kill() {
	c.killOnce.Do(func() { go func() { _ = c.sess.Close() }() })
}

// stop closes the connection and waits until it ended; a stdio server that
// has not exited after the graceful steps is killed.
func (s *server) stop(c *conn) error {
	c.kill()
	grace := 2*s.opts.TerminateTimeout + time.Second
	select {
	case <-c.dead:
		return nil
	case <-time.After(grace):
	}
	if c.cmd == nil {
		return fmt.Errorf("MCP server %q: the connection did not close within %s", s.name, grace)
	}
	s.log.Warn("MCP server did not stop in time; killing its process group", "after", grace)
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	_ = c.cmd.Process.Kill()
	<-c.dead
	return nil
}

// describeExit says why a connection ended, from the error its Wait
// returned (for a stdio server, the process's exit error).
func (s *server) describeExit(c *conn, waitErr error) string {
	var exitErr *exec.ExitError
	switch {
	case c.cmd != nil && errors.As(waitErr, &exitErr):
		return fmt.Sprintf("exited (%s)", exitErr.ProcessState.String())
	case c.cmd != nil && waitErr == nil:
		return "exited (exit status 0)"
	case waitErr == nil || errors.Is(waitErr, mcp.ErrConnectionClosed):
		return "dropped the connection"
	}
	return fmt.Sprintf("dropped the connection (%v)", waitErr)
}

// setState publishes the live connection (nil while restarting) and wakes
// the calls waiting for a change.
func (s *server) setState(c *conn, down error) {
	s.mu.Lock()
	s.cur, s.down = c, down
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// supervise restarts the server whenever its connection ends, until close.
func (s *server) supervise(c *conn) {
	defer close(s.done)
	failures := 0
	var last string
	for {
		if c != nil {
			s.setState(c, nil)
			select {
			case <-c.dead:
			case <-s.ctx.Done():
				s.stopErr = s.stop(c)
				return
			}
			if s.ctx.Err() != nil {
				return
			}
			last = c.exit
			lived := time.Since(c.since)
			s.log.Warn("MCP server "+c.exit+"; restarting it", "lived", lived)
			s.setState(nil, nil)
			if lived >= s.opts.StableAfter {
				failures = 0
			}
		}
		failures++
		if failures > s.opts.MaxRestarts {
			down := fmt.Errorf("%w: MCP server %q %s after %d restarts in a row", ErrServerDown, s.name, last, s.opts.MaxRestarts)
			s.log.Error("MCP server is down; restarting it only when a call needs it", "error", down)
			s.setState(nil, down)
			select {
			case <-s.wake:
			case <-s.ctx.Done():
				return
			}
			failures = s.opts.MaxRestarts
		} else {
			delay := min(s.opts.RestartBackoff<<(failures-1), s.opts.MaxRestartBackoff)
			if delay <= 0 { // shifted out of range
				delay = s.opts.MaxRestartBackoff
			}
			select {
			case <-time.After(delay):
			case <-s.ctx.Done():
				return
			}
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.ConnectTimeout)
		var err error
		c, err = s.connect(ctx)
		cancel()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			last = fmt.Sprintf("could not be started (%v)", err)
			s.log.Warn("MCP server restart failed", "attempt", failures, "error", err)
			c = nil
			continue
		}
		s.log.Info("MCP server restarted", "attempt", failures)
	}
}

// acquire returns the live connection, waiting while the server restarts.
// A down server gets one connection attempt per call.
func (s *server) acquire(ctx context.Context) (*conn, error) {
	asked := false
	for {
		s.mu.Lock()
		c, down, ch, closing := s.cur, s.down, s.changed, s.closing
		s.mu.Unlock()
		switch {
		case closing:
			return nil, fmt.Errorf("%w: MCP server %q is stopped", ErrClosed, s.name)
		case c != nil:
			select {
			case <-c.dead: // ended; the supervisor is about to notice
			default:
				return c, nil
			}
		case down != nil && asked:
			return nil, down
		case down != nil:
			asked = true
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// call runs one tools/call of the server's tool remote.
func (s *server) call(ctx context.Context, remote string, call tool.Call) (tool.Result, error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	params := &mcp.CallToolParams{
		Name:      remote,
		Arguments: json.RawMessage(call.Arguments),
		Meta:      mcp.Meta{MetaSessionID: call.SessionID, MetaCallID: call.CallID},
	}
	res, err := c.sess.CallTool(ctx, params)
	if err == nil {
		return s.result(remote, res), nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return tool.Result{}, ctxErr
	}
	if wire := (*jsonrpc.Error)(nil); errors.As(err, &wire) {
		return tool.Result{}, fmt.Errorf("MCP server %q answered the call with an error: %s", s.name, wire.Message)
	}
	// The transport failed: the process exited or the connection dropped.
	// Make sure the connection is gone so the supervisor restarts it.
	s.log.Warn("MCP call failed in transport; dropping the connection", "tool", remote, "error", err)
	c.kill()
	select {
	case <-c.dead:
	case <-time.After(deathWait):
	}
	return tool.Result{}, &exitError{server: s.name, exit: c.exitText(), cause: err}
}

// exitText returns why the connection ended, or a generic text when it has
// not ended yet.
func (c *conn) exitText() string {
	select {
	case <-c.dead:
		return c.exit
	default:
		return "stopped answering"
	}
}

// exitError is the failure of a call whose server exited or dropped the
// connection during it.
type exitError struct {
	server, exit string
	cause        error
}

func (e *exitError) Error() string {
	return fmt.Sprintf("MCP server %q %s during the call; the call's effects are unknown; the server is restarted for the next call",
		e.server, e.exit)
}

func (e *exitError) Is(target error) bool { return target == ErrServerExited }

func (e *exitError) Unwrap() error { return e.cause }

// close stops the supervisor and the connection and waits for both.
func (s *server) close() error {
	s.mu.Lock()
	s.closing = true
	started, c := s.started, s.cur
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.cancel()
	if started {
		<-s.done
		return s.stopErr
	}
	if c != nil { // connected but its supervisor never ran (Start failed)
		return s.stop(c)
	}
	return nil
}

// stderrLog logs a stdio server's standard error line by line.
type stderrLog struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

// maxStderrLine bounds one logged line of a server's standard error.
const maxStderrLine = 4096

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxStderrLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *stderrLog) emit(line []byte) {
	if len(line) > maxStderrLine {
		line = line[:maxStderrLine]
	}
	w.log.Info("MCP server stderr", "line", string(line))
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// withHeaders returns a copy of hc that sends headers with every request.
func withHeaders(hc *http.Client, headers map[string]string) *http.Client {
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &headerTransport{base: base, headers: headers}
	return &c
}

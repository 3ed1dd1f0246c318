package mcptool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionflow/sessionflow/tool"
)

// Defaults of Options.
const (
	DefaultConnectTimeout    = 30 * time.Second
	DefaultMaxRestarts       = 5
	DefaultRestartBackoff    = 250 * time.Millisecond
	DefaultMaxRestartBackoff = 30 * time.Second
	DefaultStableAfter       = time.Minute
	DefaultTerminateTimeout  = 5 * time.Second
)

// Errors of the bridge; match them with errors.Is.
var (
	// ErrServerExited: the server exited or its connection dropped while a
	// call was in flight. The call's effects are unknown.
	ErrServerExited = errors.New("mcptool: server exited")
	// ErrServerDown: the server could not be restarted.
	ErrServerDown = errors.New("mcptool: server down")
	// ErrClosed: the bridge is closed.
	ErrClosed = errors.New("mcptool: bridge closed")
	// ErrNameCollision: two tools map to the same registered name, or a
	// registry already holds one of the names.
	ErrNameCollision = errors.New("mcptool: tool name collision")
	// ErrInvalidName: a tool's registered name would not fit
	// ^[a-zA-Z0-9_-]{1,64}$.
	ErrInvalidName = errors.New("mcptool: invalid tool name")
	// ErrStart: a server could not be started or its tools listed.
	ErrStart = errors.New("mcptool: starting server")
)

// Options tunes a Bridge; zero fields take the defaults above.
type Options struct {
	// Logger receives the bridge's log (slog.Default() when nil).
	Logger *slog.Logger
	// ConnectTimeout bounds starting a server: the process or connection,
	// the initialize handshake and, at Start, listing its tools.
	ConnectTimeout time.Duration
	// MaxRestarts is how many restarts in a row a server gets before it is
	// down (a connection that lasted StableAfter resets the count).
	MaxRestarts int
	// RestartBackoff is the delay before the first restart; it doubles with
	// each further one, up to MaxRestartBackoff.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// StableAfter is how long a connection must last to reset the count of
	// restarts.
	StableAfter time.Duration
	// TerminateTimeout is how long a stdio server gets to exit after its
	// stdin is closed, and again after SIGTERM, before it is killed.
	TerminateTimeout time.Duration
	// MaxResultBytes caps the text of one result (tool.DefaultMaxOutputBytes
	// when zero).
	MaxResultBytes int
	// HTTPClient is used for HTTP servers (http.DefaultClient when nil).
	HTTPClient *http.Client
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.MaxRestarts <= 0 {
		o.MaxRestarts = DefaultMaxRestarts
	}
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = DefaultRestartBackoff
	}
	if o.MaxRestartBackoff <= 0 {
		o.MaxRestartBackoff = DefaultMaxRestartBackoff
	}
	if o.MaxRestartBackoff < o.RestartBackoff {
		o.MaxRestartBackoff = o.RestartBackoff
	}
	if o.StableAfter <= 0 {
		o.StableAfter = DefaultStableAfter
	}
	if o.TerminateTimeout <= 0 {
		o.TerminateTimeout = DefaultTerminateTimeout
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = tool.DefaultMaxOutputBytes
	}
	return o
}

// Bridge holds the connections to the configured MCP servers and the tools
// they offer. It is safe for concurrent use.
type Bridge struct {
	opts    Options
	servers []*server
	tools   []tool.Tool

	closeOnce sync.Once
	closeErr  error
}

// Start connects to every enabled server of cfg, lists its tools (all
// pages) and returns the bridge offering them. It fails, stopping the
// servers it started, when the configuration is invalid, a server cannot be
// started or listed within Options.ConnectTimeout (ErrStart), or a tool name
// cannot be registered (ErrInvalidName, ErrNameCollision). ctx bounds the
// start only; the servers run until Close.
func Start(ctx context.Context, cfg Config, opts Options) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	b := &Bridge{opts: opts}
	names := cfg.names(false)
	b.servers = make([]*server, len(names))
	lists := make([][]*mcp.Tool, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		s := newServer(name, cfg.Servers[name], opts)
		b.servers[i] = s
		wg.Go(func() { lists[i], errs[i] = s.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = b.Close()
		return nil, err
	}
	owner := map[string]string{}
	for i, s := range b.servers {
		for _, mt := range lists[i] {
			t, err := s.toolFor(mt)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if prev, ok := owner[t.Name]; ok {
				errs = append(errs, fmt.Errorf("%w: %q is the name of %s and of tool %q of server %q",
					ErrNameCollision, t.Name, prev, mt.Name, s.name))
				continue
			}
			owner[t.Name] = fmt.Sprintf("tool %q of server %q", mt.Name, s.name)
			b.tools = append(b.tools, t)
		}
	}
	if err := errors.Join(errs...); err != nil {
		_ = b.Close()
		return nil, err
	}
	slices.SortFunc(b.tools, func(x, y tool.Tool) int { return strings.Compare(x.Name, y.Name) })
	for _, s := range b.servers {
		s.run()
	}
	opts.Logger.Info("MCP servers started", "servers", len(b.servers), "tools", len(b.tools))
	return b, nil
}

// Tools returns the servers' tools, sorted by name.
func (b *Bridge) Tools() []tool.Tool {
	return slices.Clone(b.tools)
}

// Register adds the bridge's tools to r. When r already holds one of their
// names nothing is added and the error wraps ErrNameCollision; any other
// error is the first Register error (the tools before it stay registered).
func (b *Bridge) Register(r *tool.Registry) error {
	var clash []string
	for _, t := range b.tools {
		if _, ok := r.Lookup(t.Name); ok {
			clash = append(clash, t.Name)
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("%w: the registry already holds %s", ErrNameCollision, strings.Join(clash, ", "))
	}
	for _, t := range b.tools {
		if err := r.Register(t); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every server (a stdio server gets its stdin closed, then
// SIGTERM, each after Options.TerminateTimeout, then its process group gets
// SIGKILL) and waits for them. Calls in flight fail; later calls fail with ErrClosed. It returns the
// first error of stopping a server and is idempotent.
func (b *Bridge) Close() error {
	b.closeOnce.Do(func() {
		var wg sync.WaitGroup
		errs := make([]error, len(b.servers))
		for i, s := range b.servers {
			if s == nil {
				continue
			}
			wg.Go(func() { errs[i] = s.close() })
		}
		wg.Wait()
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

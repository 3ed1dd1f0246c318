// Package devserver runs the Temporal CLI dev server (`temporal server
// start-dev`, Web UI included) for sessionflow's embedded dev mode, its demo
// and its integration tests.
//
// The main module never imports go.temporal.io/server: the CLI is pinned in
// the nested tools/ module and run as a separate process, which Locate finds
// or builds on first use. Start waits
// for the server's health (package internal/app/readiness): it fails at once
// when the process exits and reports the server's own output.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring (internal/app). It may import any package below the
// client's row, the client and the other program-wiring packages; only
// programs and tests import it.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/wire"
)

// SearchAttributes returns the custom search attributes Start registers,
// by name: those sessionflow's workflows set, all of type Keyword.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		wire.SearchAttributeSessionID:    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		wire.SearchAttributeSessionPhase: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		wire.SearchAttributeSessionCwd:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// DBFileName is the SQLite file of a persistent dev server in its state
// directory.
const DBFileName = "temporal.db"

// DefaultNamespace is the namespace the dev server serves unless told
// otherwise.
const DefaultNamespace = "default"

// Options configure Start.
type Options struct {
	// CLIPath is the Temporal CLI binary; empty means Locate(ctx, Locate).
	CLIPath string
	// Locate configures the search for the CLI when CLIPath is empty.
	Locate LocateOptions
	// StateDir holds the SQLite database (temporal.db) of a persistent
	// server, so workflows survive a restart. Required unless Ephemeral.
	StateDir string
	// Ephemeral keeps the server's state in memory.
	Ephemeral bool
	// Namespace is the namespace to serve and register; default "default".
	Namespace string
	// IP is the address the server binds; default 127.0.0.1.
	IP string
	// Port is the frontend gRPC port; 0 picks a free one.
	Port int
	// UI enables the Web UI.
	UI bool
	// UIPort is the Web UI port when UI is set; 0 picks a free one.
	UIPort int
	// LogLevel is the server's log level; default "warn".
	LogLevel string
	// DynamicConfig holds KEY=VALUE dynamic config values (values are JSON),
	// each passed as --dynamic-config-value, e.g.
	// "limit.historyCount.suggestContinueAsNew=50". They are applied over
	// DefaultDynamicConfig: a key given here replaces its default.
	DynamicConfig []string
	// ExtraArgs are appended to `temporal server start-dev`.
	ExtraArgs []string
	// Output receives the server's stdout and stderr; nil discards them
	// (the tail of the output is kept for the error of a failed start).
	Output io.Writer
	// ReadyTimeout bounds the wait for the server to answer its health
	// check and serve its namespace; 0 means readiness.DefaultTimeout
	// (minutes, for a cold start on a loaded machine). A server that exits
	// fails the start at once, whatever the timeout.
	ReadyTimeout time.Duration
	// Logger receives the SDK client's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultDynamicConfig returns the dynamic config values Start gives every
// dev server unless Options.DynamicConfig sets the same key.
//
// The dev server is one process with one history shard, so the production
// defaults that assume many shards and many matching hosts throttle it:
//
//   - history.*ProcessorMaxPollRPS caps each queue of a shard at 20 reads a
//     second, so every task the history service hands on (a workflow task
//     after a start, an update or an activity result; an activity task)
//     waits for the next 50 ms tick. A one-activity workflow took 150 ms
//     from start to result, three ticks; with the caps raised, 18 ms.
//   - matching.numTaskqueue{Read,Write}Partitions splits every task queue
//     into 4 partitions whose tasks are forwarded between partitions when
//     the pollers wait on another one. One partition doubled the workflows a
//     single worker completes per second (docs/DECISIONS.md D8).
//
// system.enableActivityEagerExecution lets the server hand an activity a
// workflow task schedules straight back to the worker that completed the
// task, in its answer, when that worker polls the activity's task queue
// and has a free slot (the SDK asks for it by default): the activity skips
// the matching service's dispatch (in a tool round, the tool's activity and
// the next model call's: about 2 ms each on the benchmark's machine,
// docs/PERFORMANCE.md). The server's default is off.
//
// history.maxInFlightUpdates is 64 (the server's default is 10): callers
// appending at the end of a session (client.AppendAtEnd) send without
// waiting for one another, so more than ten are in flight on one session
// at once, and the server refuses each one beyond the limit with
// ResourceExhausted, which the SDK retries after a second or more; their
// total size stays bounded by history.maxInFlightUpdatePayloads below
// (docs/API.md, Appends at the end; docs/DECISIONS.md D126).
//
// One more value is not about speed: history.maxInFlightUpdatePayloads
// (wire.InFlightUpdateBytes) keeps an update whose input is too large from
// reaching a session at all. The SDK echoes an update's request into the
// workflow's answer, and the server terminates a workflow whose answer
// exceeds its 2 MiB blob limit; below this value it refuses the update
// instead (docs/API.md: Update input limit, docs/DECISIONS.md D75).
//
// deploy/dynamicconfig/sessionflow.yaml sets the same values for the
// single-node compose stack.
func DefaultDynamicConfig() []string {
	return []string{
		fmt.Sprintf("%s=%d", wire.InFlightUpdateConfigKey, wire.InFlightUpdateBytes),
		"history.transferProcessorMaxPollRPS=1000",
		"history.timerProcessorMaxPollRPS=1000",
		"history.visibilityProcessorMaxPollRPS=1000",
		"history.outboundProcessorMaxPollRPS=1000",
		"matching.numTaskqueueReadPartitions=1",
		"matching.numTaskqueueWritePartitions=1",
		"system.enableActivityEagerExecution=true",
		"history.maxInFlightUpdates=64",
	}
}

// dynamicConfig merges the KEY=VALUE values of overrides over
// DefaultDynamicConfig, one value per key, defaults first in their order.
func dynamicConfig(overrides []string) []string {
	key := func(kv string) string { k, _, _ := strings.Cut(kv, "="); return k }
	set := make(map[string]bool, len(overrides))
	for _, kv := range overrides {
		set[key(kv)] = true
	}
	var out []string
	for _, kv := range DefaultDynamicConfig() {
		if !set[key(kv)] {
			out = append(out, kv)
		}
	}
	return append(out, overrides...)
}

// Server is a running dev server.
type Server struct {
	proc      *process
	client    client.Client
	cliPath   string
	address   string
	namespace string
	uiURL     string
	dbPath    string

	stopOnce sync.Once
	stopErr  error
}

// Start starts a dev server, waits until it answers, and registers
// sessionflow's search attributes (SearchAttributes) in its namespace.
// Stop it with Server.Stop.
//
// Ports left to the kernel (Port and UIPort 0) are free when they are
// picked but may be taken by another process before the server binds them,
// and the server binds further ports of its own, whatever Port and UIPort
// say; a server that exits because a port was taken is started again (on
// new ports where they are picked), up to three times in all. A Port or
// UIPort found taken before the start is refused at once (errPortTaken).
func Start(ctx context.Context, opts Options) (*Server, error) {
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, opts)
		if err == nil || attempt == 3 || errors.Is(err, errPortTaken) ||
			!strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
			return s, err
		}
	}
}

// errPortTaken reports that a port the caller named is taken: starting
// again would find it taken again.
var errPortTaken = errors.New("port taken")

// start is one attempt of Start.
func start(ctx context.Context, opts Options) (*Server, error) {
	if !opts.Ephemeral && opts.StateDir == "" {
		return nil, errors.New("devserver: a state directory is required unless the server is ephemeral")
	}
	path := opts.CLIPath
	if path == "" {
		var err error
		if path, err = Locate(ctx, opts.Locate); err != nil {
			return nil, err
		}
	}
	ns := opts.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	ip := opts.IP
	if ip == "" {
		ip = "127.0.0.1"
	}
	port := opts.Port
	if port == 0 {
		var err error
		if port, err = freePort(ip); err != nil {
			return nil, err
		}
	} else if err := checkPortFree(ip, port, "frontend"); err != nil {
		// Without this check, a server already listening there would answer
		// the readiness probe in place of the one that failed to bind.
		return nil, err
	}
	s := &Server{
		cliPath:   path,
		address:   net.JoinHostPort(ip, strconv.Itoa(port)),
		namespace: ns,
	}
	logLevel := opts.LogLevel
	if logLevel == "" {
		logLevel = "warn"
	}
	var dbFile, uiPort string
	if !opts.Ephemeral {
		dir, err := filepath.Abs(opts.StateDir)
		if err != nil {
			return nil, fmt.Errorf("devserver: state directory: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("devserver: creating the state directory: %w", err)
		}
		s.dbPath = filepath.Join(dir, DBFileName)
		dbFile = s.dbPath
	}
	if opts.UI {
		ui := opts.UIPort
		if ui == 0 {
			var err error
			if ui, err = freePort(ip); err != nil {
				return nil, err
			}
		} else if err := checkPortFree(ip, ui, "Web UI"); err != nil {
			return nil, err
		}
		uiPort = strconv.Itoa(ui)
		s.uiURL = "http://" + net.JoinHostPort(ip, uiPort)
	}
	var extra []string
	for _, kv := range dynamicConfig(opts.DynamicConfig) {
		extra = append(extra, "--dynamic-config-value", kv)
	}
	extra = append(extra, opts.ExtraArgs...)
	args := serverArgs(ip, strconv.Itoa(port), ns, logLevel, dbFile, opts.UI, uiPort, extra)

	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	out := &tailBuffer{max: 8 << 10}
	var w io.Writer = out
	if opts.Output != nil {
		w = io.MultiWriter(out, &lockedWriter{w: opts.Output})
	}
	proc, err := startProcess(path, args, w)
	if err != nil {
		return nil, fmt.Errorf("starting the Temporal dev server (%s): %w", path, err)
	}
	c, err := awaitReady(ctx, proc, client.Options{
		HostPort:  s.address,
		Namespace: ns,
		Logger:    log.NewStructuredLogger(logger),
	}, opts.ReadyTimeout, out.String)
	if err != nil {
		proc.kill()
		return nil, fmt.Errorf("starting the Temporal dev server (%s): %w", path, err)
	}
	s.proc, s.client = proc, c
	if err := registerSearchAttributes(ctx, c, ns); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// registerSearchAttributes adds sessionflow's search attributes to ns; ones
// already present are fine.
func registerSearchAttributes(ctx context.Context, c client.Client, ns string) error {
	_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		SearchAttributes: SearchAttributes(),
		Namespace:        ns,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("registering search attributes in namespace %s: %w", ns, err)
	}
	return nil
}

// Address is the frontend's host:port.
func (s *Server) Address() string { return s.address }

// Namespace is the namespace the server was started with.
func (s *Server) Namespace() string { return s.namespace }

// UIURL is the Web UI's URL, empty when the UI is off.
func (s *Server) UIURL() string { return s.uiURL }

// DBPath is the SQLite file of a persistent server, empty when ephemeral.
func (s *Server) DBPath() string { return s.dbPath }

// CLIPath is the Temporal CLI binary the server runs.
func (s *Server) CLIPath() string { return s.cliPath }

// Client is a client connected to the server's namespace. Stop closes it.
func (s *Server) Client() client.Client { return s.client }

// PID is the server process's id.
func (s *Server) PID() int { return s.proc.cmd.Process.Pid }

// Exited is closed when the server process has exited, whether Stop ended
// it or it died on its own (killed, crashed): a program that runs against
// the server watches it to notice a server that is gone.
func (s *Server) Exited() <-chan struct{} { return s.proc.exited }

// ExitErr is how the server process ended (an *exec.ExitError for a
// non-zero status or a signal, nil for status 0). Call it only after
// Exited is closed.
func (s *Server) ExitErr() error { return s.proc.exitErr() }

// Stop closes the client, interrupts the server and waits for it to exit.
// It is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.client.Close()
		if err := s.proc.stop(); err != nil {
			s.stopErr = fmt.Errorf("stopping the Temporal dev server: %w", err)
		}
	})
	return s.stopErr
}

// freePort asks the kernel for a free TCP port on ip.
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("devserver: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// checkPortFree fails when ip:port cannot be bound, naming what it was for.
func checkPortFree(ip string, port int, what string) error {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("devserver: the %s port %s is not free (another Temporal server?): %w: %w", what, addr, errPortTaken, err)
	}
	return l.Close()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// String returns the kept output.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lockedWriter serializes writes from the server's stdout and stderr copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

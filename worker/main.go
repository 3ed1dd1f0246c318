// Command worker is sessionflow's Temporal worker: it runs the session
// workflows and the store activities against a Temporal server.
//
//	go run ./worker                      # against TEMPORAL_ADDRESS or localhost:7233
//	go run ./worker --dev                # with an embedded dev server and its Web UI
//
// Configuration comes from flags and the environment in Temporal's
// conventions (see -h). SIGINT or SIGTERM stop it gracefully: polling stops,
// running activities finish (up to --stop-timeout), then the embedded dev
// server, if any, stops.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring. It may import any package below the client's row (wire,
// internal/lib/..., session, jsonl, provider, tool, activities, agent,
// workflows) and client, and the other program-wiring packages
// (internal/app/..., bench, deploy); nothing of testsuite.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Defaults of the dev mode flags.
const (
	defaultDevDir    = "./.sessionflow/dev"
	defaultDevPort   = 7233
	defaultDevUIPort = 8233
)

// options are the flags of the command beyond the worker's own.
type options struct {
	dev          bool
	devDir       string
	devEphemeral bool
	devPort      int
	devUIPort    int
	devPrepare   bool
	logLevel     string
	logFormat    string
}

// run is the command: it returns the process exit status.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs, wf := workerapp.NewFlagSet("worker")
	var o options
	fs.BoolVar(&o.dev, "dev", false, "start an embedded Temporal dev server (Temporal CLI, Web UI on) and run against it")
	fs.StringVar(&o.devDir, "dev-dir", defaultDevDir, "state directory of the embedded dev server (SQLite, survives restarts)")
	fs.BoolVar(&o.devEphemeral, "dev-ephemeral", false, "keep the embedded dev server's state in memory")
	fs.IntVar(&o.devPort, "dev-port", defaultDevPort, "frontend port of the embedded dev server, 0 = any free port")
	fs.IntVar(&o.devUIPort, "dev-ui-port", defaultDevUIPort, "Web UI port of the embedded dev server, 0 = any free port")
	fs.BoolVar(&o.devPrepare, "dev-prepare", false, "locate or build the Temporal CLI of dev mode, print its path and exit")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error (env SESSIONFLOW_LOG_LEVEL)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json (env SESSIONFLOW_LOG_FORMAT)")
	// The flag set reports errors to us instead of printing the usage.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "Usage: worker [flags]\n\nRuns sessionflow's Temporal worker. Flags may be written -name or --name.\n\nFlags:\n")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "worker: %v (see -h)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "worker: unexpected arguments: %s (see -h)\n", strings.Join(fs.Args(), " "))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	env := envMap(environ)
	if v := env["SESSIONFLOW_LOG_LEVEL"]; v != "" && !set["log-level"] {
		o.logLevel = v
	}
	if v := env["SESSIONFLOW_LOG_FORMAT"]; v != "" && !set["log-format"] {
		o.logFormat = v
	}
	logger, err := newLogger(stderr, o.logLevel, o.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}

	if o.devPrepare {
		path, err := devserver.Locate(ctx, devserver.LocateOptions{Progress: stderr, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			fmt.Fprintf(stderr, "worker: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, path)
		return 0
	}

	cfg, err := wf.Config(environ)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	if !o.dev {
		if o.devEphemeral || set["dev-dir"] || set["dev-port"] || set["dev-ui-port"] {
			fmt.Fprintln(stderr, "worker: the --dev-* flags need --dev")
			return 2
		}
		return exitCode(workerapp.Run(ctx, cfg, logger), stderr)
	}
	for _, name := range temporalconn.FlagNames() {
		// The embedded server serves the namespace given.
		if name != temporalconn.FlagNamespace && set[name] {
			fmt.Fprintf(stderr, "worker: --%s cannot be combined with --dev (the worker connects to the embedded server)\n", name)
			return 2
		}
	}
	return exitCode(runDev(ctx, cfg, o, env, stdout, stderr, logger), stderr)
}

// runDev starts the embedded dev server, runs the worker against it and
// stops the server after the worker.
func runDev(ctx context.Context, cfg workerapp.Config, o options, env map[string]string, stdout, stderr io.Writer, logger *slog.Logger) (err error) {
	devDir, err := filepath.Abs(o.devDir)
	if err != nil {
		return fmt.Errorf("dev directory: %w", err)
	}
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return fmt.Errorf("creating the dev directory: %w", err)
	}
	logPath := filepath.Join(devDir, "temporal.log")
	serverLog, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the dev server log: %w", err)
	}
	defer serverLog.Close()

	srv, err := devserver.Start(ctx, devserver.Options{
		Locate:    devserver.LocateOptions{Progress: stderr, Getenv: func(k string) string { return env[k] }},
		StateDir:  devDir,
		Ephemeral: o.devEphemeral,
		Namespace: cfg.Connection.Namespace,
		Port:      o.devPort,
		UI:        true,
		UIPort:    o.devUIPort,
		Output:    serverLog,
		Logger:    logger.With("component", "devserver"),
	})
	if err != nil {
		return err
	}
	defer func() {
		logger.Info("stopping the dev server")
		err = errors.Join(err, srv.Stop())
	}()

	state := srv.DBPath()
	if o.devEphemeral {
		state = "in memory (--dev-ephemeral)"
	}
	fmt.Fprintf(stdout, "Temporal dev server: %s (namespace %s)\n", srv.Address(), srv.Namespace())
	fmt.Fprintf(stdout, "Web UI:              %s\n", srv.UIURL())
	fmt.Fprintf(stdout, "Server state:        %s\n", state)
	fmt.Fprintf(stdout, "Server log:          %s\n", logPath)
	storeRoot, err := filepath.Abs(cfg.StoreRoot)
	if err != nil {
		return fmt.Errorf("store root: %w", err)
	}
	fmt.Fprintf(stdout, "Session store:       %s\n", storeRoot)

	// The dev server's state and its binary are the worker's own: no tool
	// reaches them (D69).
	cfg.Agent.DenyPaths = append(cfg.Agent.DenyPaths, devDir, srv.CLIPath())
	if cfg.TemporalUI == "" {
		cfg.TemporalUI = srv.UIURL()
	}
	cfg.Connection.Address = srv.Address()
	cfg.Connection.APIKey = ""
	cfg.Connection.TLS = nil
	return runWatched(ctx, srv, logPath, func(ctx context.Context) error { return workerapp.Run(ctx, cfg, logger) })
}

// errDevServerExited matches (errors.Is) the end of a --dev worker whose
// embedded server exited on its own.
var errDevServerExited = errors.New("the embedded Temporal dev server exited")

// runWatched runs the worker (run) while the embedded server runs: a server
// that exits on its own (killed, crashed) stops the worker, which then
// fails with errDevServerExited and how the server ended, instead of
// polling a server that is gone (docs/DECISIONS.md D73).
//
// Ctrl-C on a terminal reaches the server too (it shares the process
// group), so a server that exits while the worker is being stopped is not
// reported.
func runWatched(parent context.Context, srv *devserver.Server, logPath string, run func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	go func() {
		select {
		case <-srv.Exited():
			how := "status 0"
			if err := srv.ExitErr(); err != nil {
				how = err.Error()
			}
			cancel(fmt.Errorf("%w unexpectedly (pid %d, %s); the worker stops: start `worker --dev` again (the server's log: %s)",
				errDevServerExited, srv.PID(), how, logPath))
		case <-ctx.Done():
		}
	}()
	err := run(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, errDevServerExited) && parent.Err() == nil {
		return errors.Join(cause, err)
	}
	return err
}

// exitCode reports err and maps it to an exit status.
func exitCode(err error, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 1
	}
	return 0
}

// newLogger returns a slog logger writing to w.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// envMap indexes KEY=VALUE entries.
func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

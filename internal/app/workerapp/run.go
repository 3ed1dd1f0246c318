// Package workerapp is sessionflow's worker process as a library: its
// configuration (flags and environment in Temporal's conventions), the client
// dial, the registration of every workflow and activity, Prometheus metrics of
// the SDK and of the store, and a graceful shutdown. The worker command, the
// CLI demo and the integration tests run it in-process.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring (internal/app). It may import any package below the
// client's row, the client and the other program-wiring packages; only
// programs and tests import it.
package workerapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/httpapi"
	"github.com/sessionflow/sessionflow/internal/app/telemetry"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/webui"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// Register registers sessionflow's workflows (CreateSession, ResumeSession,
// LiveSession, SessionLoop) and the store activities over rt with r. The
// session workflows are registered through their strict decoders
// (workflows.CreateSessionWorkflow, workflows.ResumeSessionWorkflow,
// workflows.SessionLoopWorkflow). tc is the Temporal client the activities
// use to check a lease's owner (ForfeitDeadOwner); nil keeps every lease.
// The activities renamed are registered under their earlier names too
// (activities.RegisterLegacyNames).
func Register(r worker.Registry, rt *activities.Runtime, tc client.Client) {
	r.RegisterWorkflowWithOptions(workflows.CreateSessionWorkflow, workflow.RegisterOptions{Name: wire.CreateSessionName})
	r.RegisterWorkflowWithOptions(workflows.ResumeSessionWorkflow, workflow.RegisterOptions{Name: wire.ResumeSessionName})
	r.RegisterWorkflowWithOptions(workflows.LiveSession, workflow.RegisterOptions{Name: wire.LiveSessionName})
	r.RegisterWorkflowWithOptions(workflows.SessionLoopWorkflow, workflow.RegisterOptions{Name: wire.SessionLoopName})
	acts := &activities.Activities{Runtime: rt, Temporal: tc}
	r.RegisterActivity(acts)
	activities.RegisterLegacyNames(r, acts)
}

// dialBackoff bounds the wait between attempts to reach the server.
var dialBackoff = struct{ first, max time.Duration }{500 * time.Millisecond, 10 * time.Second}

// Run runs the worker until ctx is done, then stops it gracefully: polling
// stops and running activities get up to cfg.StopTimeout to finish. It
// returns nil after a requested shutdown and an error when the worker could
// not start or failed. Until the server answers, Run keeps dialing (logging
// each failure) unless ctx ends first.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid worker configuration: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}

	reg, err := newRegistry()
	if err != nil {
		return err
	}
	metrics, err := NewMetrics(reg)
	if err != nil {
		return err
	}
	sdkMetrics, meterProvider, err := newSDKMetrics(reg, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := meterProvider.Shutdown(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("stopping the SDK metrics", "error", err)
		}
	}()

	var metricsAddr string
	if cfg.MetricsAddress != "" {
		stop, addr, err := serveMetrics(cfg.MetricsAddress, reg, logger)
		if err != nil {
			return err
		}
		defer stop()
		metricsAddr = addr
	}

	var httpLn net.Listener
	if cfg.HTTPAddress != "" {
		// Bound before anything starts: a taken port fails the start.
		if httpLn, err = httpapi.Listen(cfg.HTTPAddress, cfg.HTTPToken); err != nil {
			return err
		}
		defer httpLn.Close()
	}

	tr := cfg.Tracing
	if tr == nil {
		if tr, err = telemetry.New(ctx, telemetry.Options{ServiceName: "sessionflow-worker"}); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := tr.Shutdown(sctx); err != nil {
				logger.Warn("flushing traces", "error", err)
			}
		}()
	}

	c := cfg.Client
	clientTraced := false
	address, namespace := cfg.Connection.Address, cfg.Connection.Namespace
	if c == nil {
		c, err = dial(ctx, cfg.Connection, cfg.Identity, sdkMetrics, tr.ClientInterceptors(), logger)
		if err != nil {
			return err
		}
		defer c.Close()
		clientTraced = true
	}

	store, err := jsonl.NewStore(jsonl.Options{
		Root:        cfg.StoreRoot,
		Compression: cfg.Compression,
		Format:      cfg.Format,
		FS:          cfg.StoreFS,
		Logger:      logger.With("component", "store"),
		Metrics:     metrics,

		MaxDescriptors: cfg.MaxStoreDescriptors,
	})
	if err != nil {
		return fmt.Errorf("opening the session store %s: %w", cfg.StoreRoot, err)
	}

	fatal := make(chan error, 1)
	setWorkflowCacheSize(cfg.WorkflowCacheSize)
	w := worker.New(c, cfg.TaskQueue, workerOptions(cfg, append(tr.WorkerInterceptors(clientTraced), newWorkerInterceptor(cfg, metrics)), fatal))
	// One runtime for the store and the agent activities: one store, one
	// heartbeat (docs/DECISIONS.md D84).
	rt := &activities.Runtime{Store: store, Permissions: cfg.Permissions}
	Register(w, rt, c)
	agentCfg, stopMCP, err := StartMCP(ctx, cfg.Agent, logger)
	if err != nil {
		return err
	}
	agentCfg.DenyPaths = append(ownPaths(cfg), agentCfg.DenyPaths...)
	defer stopMCP()
	agentActs, err := AgentActivities(rt, agentCfg)
	if err != nil {
		return err
	}
	agentActs.TracerProvider = tr.TracerProvider()
	agentActs.TraceContent = cfg.TraceContent
	RegisterAgent(w, agentActs)
	if cfg.Register != nil {
		cfg.Register(w)
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	var httpAddr string
	if httpLn != nil {
		stop, err := serveHTTP(ctx, httpLn, store, c, cfg, namespace, logger)
		if err != nil {
			w.Stop()
			return err
		}
		defer stop()
		httpAddr = httpLn.Addr().String()
	}
	logger.Info("worker started",
		"address", address, "namespace", namespace, "taskQueue", cfg.TaskQueue,
		"storeRoot", cfg.StoreRoot, "compression", cfg.Compression, "metrics", metricsAddr, "http", httpAddr)
	if cfg.OnStarted != nil {
		cfg.OnStarted(Started{Address: address, Namespace: namespace, TaskQueue: cfg.TaskQueue, MetricsAddr: metricsAddr, HTTPAddr: httpAddr, Client: c, Store: store})
	}

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("stopping the worker: waiting for running activities", "timeout", cfg.StopTimeout)
	case err := <-fatal:
		runErr = fmt.Errorf("worker failed: %w", err)
		logger.Error("worker failed", "error", err)
	}
	w.Stop()
	logger.Info("worker stopped")
	return runErr
}

// workerOptions are the SDK worker's options of cfg: its limits, its stop
// and sticky timeouts (a zero StickyTimeout takes DefaultStickyTimeout) and
// the interceptors; a fatal error is sent to fatal without blocking.
func workerOptions(cfg Config, icpts []interceptor.WorkerInterceptor, fatal chan<- error) worker.Options {
	sticky := cfg.StickyTimeout
	if sticky <= 0 {
		sticky = DefaultStickyTimeout
	}
	return worker.Options{
		MaxConcurrentActivityExecutionSize:     cfg.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: cfg.MaxConcurrentWorkflowTasks,
		WorkerStopTimeout:                      cfg.StopTimeout,
		StickyScheduleToStartTimeout:           sticky,
		Identity:                               cfg.Identity,
		Interceptors:                           icpts,
		OnFatalError: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		},
	}
}

// dial connects a client, retrying with backoff until the server answers or
// ctx ends.
func dial(ctx context.Context, conn envconfig.ClientConfigProfile, identity string, metrics client.MetricsHandler, icpts []interceptor.ClientInterceptor, logger *slog.Logger) (client.Client, error) {
	opts, err := temporalconn.ClientOptions(conn)
	if err != nil {
		return nil, err
	}
	opts.Interceptors = append(opts.Interceptors, icpts...)
	opts.Logger = log.NewStructuredLogger(logger)
	opts.MetricsHandler = metrics
	opts.Identity = identity
	wait := dialBackoff.first
	for {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, errors.Join(ctx.Err(), err))
		}
		logger.Warn("Temporal is not reachable yet; retrying", "address", opts.HostPort, "namespace", opts.Namespace, "retryIn", wait, "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, errors.Join(ctx.Err(), err))
		case <-time.After(wait):
		}
		wait = min(2*wait, dialBackoff.max)
	}
}

// serveMetrics serves reg at /metrics on addr. It returns a function that
// shuts the server down and the bound address.
func serveMetrics(addr string, reg *prometheus.Registry, logger *slog.Logger) (func(), string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listening for metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server failed", "error", err)
		}
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			logger.Warn("stopping the metrics server", "error", err)
		}
		<-done
	}
	return stop, ln.Addr().String(), nil
}

// serveHTTP serves the session API on ln over the worker's store and
// client (docs/API.md, "HTTP API"). It returns the function that stops it:
// its streams end and requests in flight get a few seconds.
func serveHTTP(ctx context.Context, ln net.Listener, store *jsonl.Store, c client.Client, cfg Config, namespace string, logger *slog.Logger) (func(), error) {
	page, err := webui.Handler(webui.Options{TemporalUI: cfg.TemporalUI, Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("--temporal-ui: %w", err)
	}
	api, err := httpapi.New(httpapi.Options{
		Page:    page,
		Store:   store,
		Control: sfclient.New(c, sfclient.Options{TaskQueue: cfg.TaskQueue, Namespace: namespace}),
		Token:   cfg.HTTPToken,
		Logger:  logger.With("component", "http"),
	})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := api.Serve(sctx, ln); err != nil {
			logger.Error("the HTTP API failed", "error", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// ownPaths are the paths of cfg the built-in tools never reach: the store
// root, the TLS files and the running binary (D69).
func ownPaths(cfg Config) []string {
	paths := []string{cfg.StoreRoot}
	if exe, err := os.Executable(); err == nil {
		paths = append(paths, exe)
	}
	if t := cfg.Connection.TLS; t != nil {
		paths = append(paths, t.ClientCertPath, t.ClientKeyPath, t.ServerCACertPath)
	}
	return paths
}

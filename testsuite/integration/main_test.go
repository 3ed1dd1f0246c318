package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
)

// record makes TestRecordHistories write the fixtures of ../histories
// instead of comparing fresh runs with them.
var record = flag.Bool("record", false, "re-record testsuite/histories from real runs")

// canHistoryLimit is the history length at which the continue-as-new
// server suggests continue-as-new.
const canHistoryLimit = 40

// clientIdentity names the tests' clients and workers in the histories
// (instead of pid@host), so recorded fixtures carry no machine names.
const clientIdentity = "sessionflow-integration"

// server is a Temporal server the tests run against.
type server struct {
	client    client.Client
	address   string
	namespace string
	stop      func()
}

var (
	// shared is the package's server: a local dev server, or the one
	// TEMPORAL_ADDRESS names.
	shared *server

	// canServer is the dev server with a small history limit, started by
	// the first test that needs it.
	canMu     sync.Mutex
	canServer *server
	canErr    error

	// runTag makes the workflow ids of this run unique on a server that
	// outlives it.
	runTag string
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Every workflow task replays the whole history: a workflow that is
	// not deterministic fails here and not only after a worker restart.
	worker.SetStickyWorkflowCacheSize(0)
	os.Exit(run(m))
}

func run(m *testing.M) int {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	runTag = hex.EncodeToString(b)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	s, err := startShared(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: starting the Temporal server:", err)
		return 1
	}
	shared = s
	code := m.Run()
	removeBinaries()
	s.stop()
	canMu.Lock()
	if canServer != nil {
		canServer.stop()
	}
	canMu.Unlock()
	return code
}

// quietLogger is the SDK logger of the tests' clients: errors only.
func quietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// discardLogger is the slog logger of the in-process workers.
func discardLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startShared connects to TEMPORAL_ADDRESS when it is set, else starts an
// ephemeral dev server.
func startShared(ctx context.Context) (*server, error) {
	if os.Getenv("TEMPORAL_ADDRESS") != "" {
		opts, err := temporalconn.FromEnv(temporalconn.NewEnv(os.Environ()))
		if err != nil {
			return nil, fmt.Errorf("the client options of TEMPORAL_ADDRESS: %w", err)
		}
		opts.Identity = clientIdentity
		opts.Logger = quietLogger()
		c, err := client.DialContext(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", opts.HostPort, err)
		}
		return &server{client: c, address: opts.HostPort, namespace: opts.Namespace, stop: c.Close}, nil
	}
	return startDevServer(ctx, nil)
}

// startDevServer starts an ephemeral dev server with the given dynamic
// config values and dials a client with the tests' identity.
func startDevServer(ctx context.Context, dynamicConfig []string) (*server, error) {
	ds, err := devserver.Start(ctx, devserver.Options{
		Ephemeral:     true,
		DynamicConfig: dynamicConfig,
		Locate:        devserver.LocateOptions{Progress: os.Stderr},
	})
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  ds.Address(),
		Namespace: ds.Namespace(),
		Identity:  clientIdentity,
		Logger:    quietLogger(),
	})
	if err != nil {
		_ = ds.Stop()
		return nil, fmt.Errorf("connecting to the dev server at %s: %w", ds.Address(), err)
	}
	stop := func() {
		c.Close()
		if err := ds.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: stopping the dev server:", err)
		}
	}
	return &server{client: c, address: ds.Address(), namespace: ds.Namespace(), stop: stop}, nil
}

// continueAsNewServer returns the dev server whose history limit makes a
// live session continue as new after a few appends. It is a local dev
// server even when TEMPORAL_ADDRESS is set: the limit is a server setting.
func continueAsNewServer(t *testing.T) *server {
	t.Helper()
	canMu.Lock()
	defer canMu.Unlock()
	if canServer == nil && canErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		canServer, canErr = startDevServer(ctx, []string{fmt.Sprintf("limit.historyCount.suggestContinueAsNew=%d", canHistoryLimit)})
		if canErr != nil {
			canErr = errors.Join(errors.New("starting the continue-as-new dev server"), canErr)
		}
	}
	if canErr != nil {
		t.Fatal(canErr)
	}
	return canServer
}

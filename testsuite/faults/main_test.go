package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
)

var (
	// temporalClient is the package's client of the shared server.
	temporalClient client.Client
	// runTag makes the task queues and session ids of this run unique on a
	// server that outlives it.
	runTag string
)

func TestMain(m *testing.M) {
	worker.SetStickyWorkflowCacheSize(0)
	os.Exit(run(m))
}

func run(m *testing.M) int {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	runTag = hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	stop, err := connect(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: starting the Temporal server:", err)
		return 1
	}
	defer stop()
	return m.Run()
}

// quietLogger is the SDK logger of the tests' client: errors only.
func quietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// discardLogger is the slog logger of the in-process workers.
func discardLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// connect dials TEMPORAL_ADDRESS when it is set, else starts an ephemeral
// dev server; it returns what stops it.
func connect(ctx context.Context) (func(), error) {
	if os.Getenv("TEMPORAL_ADDRESS") != "" {
		opts, err := temporalconn.FromEnv(temporalconn.NewEnv(os.Environ()))
		if err != nil {
			return nil, fmt.Errorf("the client options of TEMPORAL_ADDRESS: %w", err)
		}
		opts.Logger = quietLogger()
		c, err := client.DialContext(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", opts.HostPort, err)
		}
		temporalClient = c
		return c.Close, nil
	}
	ds, err := devserver.Start(ctx, devserver.Options{Ephemeral: true, Locate: devserver.LocateOptions{Progress: os.Stderr}})
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: ds.Address(), Namespace: ds.Namespace(), Logger: quietLogger()})
	if err != nil {
		_ = ds.Stop()
		return nil, fmt.Errorf("connecting to the dev server at %s: %w", ds.Address(), err)
	}
	temporalClient = c
	return func() {
		c.Close()
		if err := ds.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: stopping the dev server:", err)
		}
	}, nil
}

package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/cluster"
)

// EnvSwitch is the environment variable that turns the tests on.
const EnvSwitch = "SESSIONFLOW_CLUSTER"

var (
	// lc is the cluster of the package's tests: two workers on one task
	// queue and one store root.
	lc *cluster.Cluster
	// runTag makes the session ids of a run unique.
	runTag string
)

func TestMain(m *testing.M) {
	if os.Getenv(EnvSwitch) != "1" {
		fmt.Printf("testsuite/cluster: not run; %s=1 runs the tests on a local cluster (see the package doc)\n", EnvSwitch)
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	runTag = hex.EncodeToString(b)
	// The cluster's directory is kept when a test fails, for its logs.
	dir, err := os.MkdirTemp("", "sessionflow-cluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsuite/cluster:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	c, err := cluster.Start(ctx, cluster.Options{
		Dir:      dir,
		Workers:  2,
		Progress: os.Stderr,
		// A workflow task waits this long on the sticky queue of a killed
		// worker before any worker may take it.
		WorkerArgs: []string{"--sticky-timeout", "2s"},
	})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsuite/cluster: starting the cluster:", err)
		fmt.Fprintf(os.Stderr, "testsuite/cluster: logs in %s\n", dir)
		return 1
	}
	lc = c
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testsuite/cluster: stopping the cluster:", err)
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "testsuite/cluster: logs in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}

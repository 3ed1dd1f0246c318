// Command cluster runs sessionflow's production topology on this machine,
// without containers (package internal/app/cluster): PostgreSQL from Debian's
// package (installed with apt-get when missing), the compose stack's schema
// and namespace setup, the Temporal server with deploy/temporal/config
// (4 history shards, SQL visibility with sessionflow's search attributes)
// and N sessionflow workers sharing one store root.
//
//	go run ./cmd/cluster -workers 2          # up until Ctrl-C
//	go run ./cmd/cluster -prepare            # build and cache the server binaries, then exit
//
// Once up it prints the environment that points `starter` and the tests at
// it. The first run builds the Temporal server and its SQL tool from tools/
// into the cache directory of the dev server's CLI (several minutes on two
// cores); later runs start in seconds.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring. It may import any package below the client's row (wire,
// internal/lib/..., session, jsonl, provider, tool, activities, agent,
// workflows) and client, and the other program-wiring packages
// (internal/app/..., bench, deploy); nothing of testsuite.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sessionflow/sessionflow/internal/cluster"
	"github.com/sessionflow/sessionflow/internal/devserver"
	"github.com/sessionflow/sessionflow/jsonl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: it returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts        cluster.Options
		compression string
		prepare     bool
	)
	fs.IntVar(&opts.Workers, "workers", cluster.DefaultWorkers, "number of worker processes, 0 = none")
	fs.StringVar(&opts.TaskQueue, "task-queue", cluster.DefaultTaskQueue, "task queue of the workers")
	fs.StringVar(&opts.Dir, "dir", "", "directory of the cluster's files and logs; default a temporary one, removed on exit")
	fs.BoolVar(&opts.Keep, "keep", false, "keep the temporary directory on exit")
	fs.StringVar(&opts.Root, "store-root", "", "store root of the workers; default <dir>/store")
	fs.StringVar(&compression, "compression", string(jsonl.CompressionZstd), "store encoding of the workers: zstd or none")
	fs.StringVar(&opts.ServerLogLevel, "server-log-level", "warn", "log level of the Temporal server")
	fs.StringVar(&opts.WorkerLogLevel, "worker-log-level", "warn", "log level of the workers")
	fs.BoolVar(&opts.NoInstall, "no-install", false, "fail instead of installing PostgreSQL with apt-get when it is missing")
	fs.BoolVar(&prepare, "prepare", false, "build (or find) the Temporal server, its SQL tool and the Temporal CLI, print their paths and exit")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cluster: unexpected arguments %v\n", fs.Args())
		return 2
	}
	if opts.Workers == 0 {
		opts.Workers = -1
	}
	opts.Compression = jsonl.Compression(compression)
	opts.Progress = stderr
	if prepare {
		return prepareBinaries(ctx, stdout, stderr)
	}

	c, err := cluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "export TEMPORAL_ADDRESS=%s TEMPORAL_NAMESPACE=%s SESSIONFLOW_TASK_QUEUE=%s SESSIONFLOW_ROOT=%s\n",
		c.Address(), c.Namespace(), c.TaskQueue(), c.Root())
	fmt.Fprintf(stderr, "cluster: up; logs in %s; Ctrl-C stops it\n", c.Dir())
	<-ctx.Done()
	fmt.Fprintln(stderr, "cluster: stopping")
	if err := c.Stop(); err != nil {
		fmt.Fprintln(stderr, "cluster:", err)
		return 1
	}
	return 0
}

// prepareBinaries locates or builds the binaries of the cluster and prints
// their paths.
func prepareBinaries(ctx context.Context, stdout, stderr io.Writer) int {
	build := cluster.BuildOptions{Progress: stderr}
	for _, t := range []cluster.Tool{cluster.ServerTool, cluster.SQLTool} {
		p, err := cluster.Locate(ctx, t, build)
		if err != nil {
			fmt.Fprintln(stderr, "cluster:", err)
			return 1
		}
		fmt.Fprintln(stdout, p)
	}
	p, err := devserver.Locate(ctx, devserver.LocateOptions{Progress: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "cluster:", err)
		return 1
	}
	fmt.Fprintln(stdout, p)
	return 0
}

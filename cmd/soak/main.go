// Command soak runs sessionflow's kill -9 soak (package testsuite/soak): an
// embedded dev server, the worker as a separate process killed with SIGKILL
// at random moments and restarted, sessions appended to concurrently, and
// the store checked against what the client saw acknowledged.
//
//	go run ./cmd/soak -kills 200 -sessions 8 -seed 1
//	go run ./cmd/soak -cluster -workers 2 -measure -kills 200   # on a local cluster (internal/app/cluster)
//
// Progress goes to stderr; the last line on stdout is the summary
// `soak: kills=N sessions=S acked=A lost=L duplicates=D unresumable=U`.
// The exit status is 1 when an invariant failed, 2 on a usage error and 3
// when the harness itself failed.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring. It may import any package below the client's row (wire,
// internal/lib/..., session, jsonl, provider, tool, activities, agent,
// workflows) and client, the other program-wiring packages (internal/app/...,
// bench, deploy), and, the house's one exception, testsuite/soak, whose
// command line it is.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/testsuite/soak"
	"github.com/sessionflow/sessionflow/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: it returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg soak.Config
	var compression string
	fs.IntVar(&cfg.Kills, "kills", soak.DefaultKills, "number of SIGKILLs of the worker")
	fs.IntVar(&cfg.Sessions, "sessions", soak.DefaultSessions, "number of sessions appended to concurrently")
	fs.IntVar(&cfg.Lifecycles, "lifecycles", soak.DefaultLifecycles, "number of concurrent lifecycle loops (create, append, dispose, resume, append, dispose), negative for none")
	fs.Int64Var(&cfg.Seed, "seed", time.Now().UnixNano(), "seed of the kill intervals and batch sizes")
	fs.DurationVar(&cfg.MinInterval, "min-interval", soak.DefaultMinInterval, "shortest time a polling worker runs before it is killed")
	fs.DurationVar(&cfg.MaxInterval, "max-interval", soak.DefaultMaxInterval, "longest time a polling worker runs before it is killed")
	fs.IntVar(&cfg.Batch, "batch", soak.DefaultBatch, "largest number of events of one append")
	fs.DurationVar(&cfg.AppendTimeout, "append-timeout", soak.DefaultAppendTimeout, "timeout of one append attempt")
	fs.DurationVar(&cfg.BatchDeadline, "batch-deadline", soak.DefaultBatchDeadline, "how long one batch is retried before the soak fails")
	fs.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 0, "heartbeat timeout of the sessions' store activities, 0 = the workflows' default "+workflows.DefaultStoreHeartbeatTimeout.String())
	fs.BoolVar(&cfg.Standby, "standby", false, "run a second worker that is never killed, so that the killed worker's sessions go on through it while it restarts")
	fs.BoolVar(&cfg.Eager, "eager", false, "start the interval before the next kill as soon as the worker polls, without waiting for every session to append again")
	fs.DurationVar(&cfg.RecoveryTimeout, "recovery-timeout", soak.DefaultRecoveryTimeout, "longest wait for every session to append again after a restart")
	fs.DurationVar(&cfg.WorkflowTaskTimeout, "workflow-task-timeout", 0, "workflow task timeout of the sessions the client starts, 0 = the client's default "+client.DefaultWorkflowTaskTimeout.String()+", negative = the server's default 10s")
	fs.DurationVar(&cfg.StickyTimeout, "sticky-timeout", 0, "the worker's sticky schedule-to-start timeout, 0 = the worker's default "+workerapp.DefaultStickyTimeout.String())
	fs.IntVar(&cfg.ContinueAsNewEvents, "continue-as-new-events", 0, "history length at which the server suggests continue-as-new, 0 = the server's default 4096")
	fs.IntVar(&cfg.SessionContinueAsNewEvents, "session-continue-as-new-events", 0, "history length at which the sessions continue as new on their own (options.continueAsNewEvents), 0 = the sessions' default 1000")
	fs.IntVar(&cfg.Turns, "turns", 0, "number of sessions whose agent runs turns (scripted model with tool calls, built-in tools in a temporary cwd, run_command off) during the kills")
	fs.BoolVar(&cfg.Cluster, "cluster", false, "run on a local cluster (PostgreSQL, the Temporal server with deploy's configuration, -workers worker processes) instead of the dev server; each kill ends one worker at random")
	fs.IntVar(&cfg.Workers, "workers", soak.DefaultClusterWorkers, "worker processes of a -cluster soak")
	fs.DurationVar(&cfg.KillBudget, "kill-budget", 0, "end the kills after this long, even before -kills, and run the final checks; 0 = no limit")
	fs.BoolVar(&cfg.Measure, "measure", false, "with -cluster: measure create-to-live, sessions/s and appends/s before the kills")
	fs.StringVar(&compression, "compression", string(jsonl.CompressionNone), "store encoding: none or zstd")
	fs.StringVar(&cfg.Dir, "dir", "", "working directory (server state, store, logs); default a temporary one")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary working directory")
	fs.StringVar(&cfg.WorkerBinary, "worker", "", "a built worker binary; default go build ./worker")
	fs.StringVar(&cfg.ModuleDir, "module", "", "the sessionflow module root; default the module of the working directory")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "soak: unexpected arguments %v\n", fs.Args())
		return 2
	}
	cfg.Compression = jsonl.Compression(compression)
	cfg.Progress = stderr
	fmt.Fprintf(stderr, "soak: seed %d\n", cfg.Seed)
	sum, err := soak.Run(ctx, cfg)
	for _, f := range sum.Failures {
		fmt.Fprintf(stderr, "soak: failure: %s\n", f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
	}
	fmt.Fprintln(stderr, "soak:", sum.Failover)
	fmt.Fprintf(stderr, "soak: took %v\n", sum.Elapsed.Round(time.Second))
	if sum.Cluster != nil {
		fmt.Fprintln(stdout, "soak:", sum.Cluster)
	}
	fmt.Fprintln(stdout, sum)
	switch {
	case err != nil:
		return 3
	case !sum.OK():
		return 1
	}
	return 0
}

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	temporalclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/devserver"
	"github.com/sessionflow/sessionflow/internal/randhex"
	"github.com/sessionflow/sessionflow/internal/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

// demoFlags configure the Temporal demo.
type demoFlags struct {
	address, namespace string
	root, compression  string
}

func newDemoCmd(a *app) *cobra.Command {
	df := &demoFlags{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a session through a crash and its resume, on an embedded Temporal server",
		Long: `Run the whole story of a durable session through Temporal: start the embedded
Temporal dev server (unless --address names a server) and a worker in this
process, create a session, append a completed turn, start a second turn whose
assistant asks for two tools and whose first tool call is recorded, then crash:
the owning workflow dies without closing its handle and the log is left with a
torn last record. The demo shows that a resume that keeps dead owners'
leases is refused while the lease stands, then resumes: the resume checks
through Temporal that the owner is gone and forfeits its lease, the torn
record is cut and the interrupted turn closed; it disposes and prints the
final log.

The first run on a machine builds the Temporal CLI dev server from tools/
(about 6 minutes on 2 cores); later runs start in seconds.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTemporalDemo(cmd.Context(), a, df)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&df.address, "address", "", "use the Temporal server at host:port instead of the embedded one")
	fs.StringVar(&df.namespace, "namespace", defaultNamespace, "namespace on the server given by --address")
	fs.StringVar(&df.root, "root", "", "store root (default: a new temporary directory)")
	fs.StringVar(&df.compression, "compression", string(jsonl.CompressionZstd), "encoding of the store root: none or zstd")
	return cmd
}

func runTemporalDemo(ctx context.Context, a *app, df *demoFlags) (err error) {
	comp, err := jsonl.ParseCompression(df.compression)
	if err != nil {
		return usageErrorf("--compression: %v", err)
	}
	if df.root == "" {
		if df.root, err = os.MkdirTemp("", "sessionflow-demo-"); err != nil {
			return err
		}
	}
	store, err := jsonl.NewStore(jsonl.Options{Root: df.root, Compression: comp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	out := &demoOut{w: a.stdout}
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	var tc temporalclient.Client
	if df.address == "" {
		out.step("start the embedded Temporal dev server")
		srv, err := devserver.Start(ctx, devserver.Options{
			Ephemeral: true,
			UI:        true,
			Locate:    devserver.LocateOptions{Progress: a.stderr},
			Logger:    slog.New(slog.DiscardHandler), // the worker logs through this client too
		})
		if err != nil {
			return err
		}
		defer srv.Stop()
		fmt.Fprintf(a.stdout, "Temporal at %s, Web UI at %s (in memory: gone when the demo ends)\n", srv.Address(), srv.UIURL())
		tc = srv.Client()
	} else {
		out.step("connect to Temporal at %s", df.address)
		if tc, err = dialTemporal(ctx, temporalclient.Options{HostPort: df.address, Namespace: df.namespace, Logger: tlog.NewStructuredLogger(quiet)}); err != nil {
			return fmt.Errorf("connect to Temporal at %s: %w", df.address, err)
		}
		defer tc.Close()
	}

	taskQueue := "sessionflow-demo-" + randhex.String(4)
	// The worker's own logs (activity failures the demo provokes on purpose)
	// stay out of the story; a worker failure still ends the demo with it.
	stopWorker, err := startDemoWorker(ctx, tc, taskQueue, df.root, comp, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer func() {
		if serr := stopWorker(); err == nil {
			err = serr
		}
	}()
	fmt.Fprintf(a.stdout, "worker polling task queue %s; store root %s (compression %s)\n", taskQueue, df.root, comp)
	namespace := df.namespace
	if df.address == "" {
		namespace = devserver.DefaultNamespace
	}
	c := client.New(tc, client.Options{TaskQueue: taskQueue, Namespace: namespace})

	id := "demo-" + randhex.String(4)
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	out.step("create session %q (workflow %s)", id, workflows.WorkflowID(id))
	if _, err := c.Create(ctx, workflows.CreateSessionRequest{SessionID: id, Meta: &workflows.SessionMeta{Cwd: cwd}}); err != nil {
		return err
	}
	if err := printDescription(ctx, a.stdout, c, id); err != nil {
		return err
	}

	now := a.now().UnixMilli()
	turn1, err := demoTurnOne(now)
	if err != nil {
		return err
	}
	out.step("append turn 1 through the Append update (acknowledged once fsynced)")
	res, err := c.Append(ctx, id, turn1)
	if err != nil {
		return err
	}
	if err := printEvents(a.stdout, turn1); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "stored; next seq %d\n", res.NextSeq)
	turn2, err := demoTurnTwo(int64(len(turn1)), now+1000)
	if err != nil {
		return err
	}
	out.step("start turn 2: the assistant asks for two tools; the first call is recorded")
	if _, err := c.Append(ctx, id, turn2); err != nil {
		return err
	}
	if err := printEvents(a.stdout, turn2); err != nil {
		return err
	}

	out.step("crash: the owner dies without closing its handle, in the middle of writing a record")
	if err := tc.TerminateWorkflow(ctx, workflows.WorkflowID(id), "", "demo: the harness process crashed"); err != nil {
		return err
	}
	snap, err := store.Stat(ctx, id)
	if err != nil {
		return err
	}
	if snap == nil {
		return fmt.Errorf("demo: session %q has no log", id)
	}
	if err := appendTorn(snap.Path, comp); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "workflow %s terminated; torn bytes appended to %s\n", workflows.WorkflowID(id), filepath.Base(snap.Path))

	out.step("inspect the damaged log (reads never modify it)")
	in, err := store.Inspect(ctx, id)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(a.stdout, buildReport(in).text()); err != nil {
		return err
	}

	out.step("a resume that keeps dead owners' leases (forfeitDeadOwner: false) is refused while the lease stands")
	keep := false
	if _, err := c.Resume(ctx, id, workflows.ResumeSessionRequest{ForfeitDeadOwner: &keep}); err == nil {
		return fmt.Errorf("demo: a resume was admitted while the lease was held")
	} else {
		fmt.Fprintf(a.stdout, "resume: %v\n", err)
	}
	// The refused resume ran as workflow session/<id> too; let it finish its
	// rollback before the next resume starts under the same workflow id.
	_ = tc.GetWorkflow(ctx, workflows.WorkflowID(id), "").Get(ctx, nil)
	lease, err := store.LeaseOf(ctx, id)
	if err != nil {
		return err
	}
	if lease == nil {
		return fmt.Errorf("demo: the dead owner's lease of %q is gone", id)
	}

	out.step("resume: the dead owner's lease is forfeited; cut the torn record, close the interrupted turn, mark the end of the seed, go live")
	before := in.Events
	if _, err := c.Resume(ctx, id, workflows.ResumeSessionRequest{}); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Temporal reports workflow %s is not running: forfeited the lease of %s\n", workflows.WorkflowID(id), describeLease(lease))
	if err := printDescription(ctx, a.stdout, c, id); err != nil {
		return err
	}
	after, err := readAll(ctx, store, id)
	if err != nil {
		return err
	}
	if err := printEvents(a.stdout, after[len(before):]); err != nil {
		return err
	}

	out.step("dispose: drain, close the handle, release the lease")
	if _, err := c.Dispose(ctx, id); err != nil {
		return err
	}
	if lease, err := store.LeaseOf(ctx, id); err != nil {
		return err
	} else if lease != nil {
		return fmt.Errorf("demo: a lease is still held after dispose: %s", describeLease(lease))
	}
	fmt.Fprintln(a.stdout, "disposed; no lease held")

	out.step("the final log (header, then one event per line)")
	return printLog(ctx, a.stdout, store, id)
}

// startDemoWorker runs a worker in this process until the returned stop
// function is called.
func startDemoWorker(ctx context.Context, tc temporalclient.Client, taskQueue, root string, comp jsonl.Compression, logger *slog.Logger) (func() error, error) {
	cfg := workerapp.DefaultConfig()
	cfg.Client = tc
	cfg.TaskQueue = taskQueue
	cfg.StoreRoot = root
	cfg.Compression = comp
	cfg.MetricsAddress = ""
	cfg.StopTimeout = 10 * time.Second
	r, err := workerapp.Start(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	return r.Stop, nil
}

// printDescription prints the Describe query's phase, handle and cursor.
func printDescription(ctx context.Context, w io.Writer, c *client.Client, id string) error {
	d, err := c.Describe(ctx, id)
	if err != nil {
		return err
	}
	handle := "none"
	if d.Handle != nil {
		handle = d.Handle.HandleID
	}
	entries := make([]string, len(d.Lifecycle))
	for i, e := range d.Lifecycle {
		entries[i] = e.Type
		if e.Source != "" {
			entries[i] += "{" + e.Source + "}"
		}
	}
	_, err = fmt.Fprintf(w, "phase %s, handle %s, next seq %d, lifecycle %v\n", d.Phase, handle, d.NextSeq, entries)
	return err
}

// readAll reads a session's whole log through a read handle.
func readAll(ctx context.Context, st *jsonl.Store, id string) ([]session.Event, error) {
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer h.Close(ctx)
	return h.Read(ctx, 0, -1)
}

// printLog prints the header line and every event of a session.
func printLog(ctx context.Context, w io.Writer, st *jsonl.Store, id string) error {
	n, err := writeLog(ctx, w, st, id)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "\n%d events, seqs 0..%d contiguous\n", n, n-1)
	return err
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	tlog "go.temporal.io/sdk/log"
	"golang.org/x/term"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

// Connection defaults and the environment variable of the task queue; the
// other settings come from Temporal's own environment variables
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*,
// TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE, TEMPORAL_GRPC_META_*), read through
// go.temporal.io/sdk/contrib/envconfig as the temporal CLI reads them.
const (
	defaultAddress   = "localhost:7233"
	defaultNamespace = "default"
	envTaskQueue     = "SESSIONFLOW_TASK_QUEUE"
)

// dialTemporal connects to Temporal; tests replace it.
var dialTemporal = temporalclient.DialContext

// connFlags are the Temporal connection flags of a lifecycle command.
type connFlags struct {
	fs *pflag.FlagSet

	address, namespace, apiKey, profile, configFile   string
	tls, tlsDisableHostVerification                   bool
	tlsCertPath, tlsKeyPath, tlsCAPath, tlsServerName string
	taskQueue                                         string
	timeout                                           time.Duration
}

// addConnFlags defines the connection flags on cmd.
func addConnFlags(cmd *cobra.Command) *connFlags {
	fs := cmd.Flags()
	cf := &connFlags{fs: fs}
	fs.StringVar(&cf.address, "address", defaultAddress, "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&cf.namespace, "namespace", defaultNamespace, "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&cf.taskQueue, "task-queue", client.DefaultTaskQueue, "task queue of the session workflows (env "+envTaskQueue+")")
	fs.StringVar(&cf.apiKey, "api-key", "", "Temporal API key; enables TLS (env TEMPORAL_API_KEY)")
	fs.StringVar(&cf.profile, "profile", "", "profile of the Temporal client config file (env TEMPORAL_PROFILE)")
	fs.StringVar(&cf.configFile, "config-file", "", "Temporal client config file, default <user config dir>/temporalio/temporal.toml (env TEMPORAL_CONFIG_FILE)")
	fs.BoolVar(&cf.tls, "tls", false, "connect with TLS; --tls=false disables it (env TEMPORAL_TLS)")
	fs.StringVar(&cf.tlsCertPath, "tls-cert-path", "", "client certificate for mTLS (env TEMPORAL_TLS_CLIENT_CERT_PATH)")
	fs.StringVar(&cf.tlsKeyPath, "tls-key-path", "", "client key for mTLS (env TEMPORAL_TLS_CLIENT_KEY_PATH)")
	fs.StringVar(&cf.tlsCAPath, "tls-ca-path", "", "server CA certificate (env TEMPORAL_TLS_SERVER_CA_CERT_PATH)")
	fs.StringVar(&cf.tlsServerName, "tls-server-name", "", "TLS server name override (env TEMPORAL_TLS_SERVER_NAME)")
	fs.BoolVar(&cf.tlsDisableHostVerification, "tls-disable-host-verification", false, "skip TLS host verification (env TEMPORAL_TLS_DISABLE_HOST_VERIFICATION)")
	fs.DurationVar(&cf.timeout, "timeout", 0, "give up after this long, e.g. 30s (default: wait as long as it takes)")
	return cf
}

// connection is a resolved Temporal connection.
type connection struct {
	// Profile is the client profile: address, namespace, API key, TLS and
	// gRPC metadata.
	Profile envconfig.ClientConfigProfile
	// TaskQueue is the task queue of the session workflows.
	TaskQueue string
}

// resolve applies, highest first: a flag given on the command line, the
// environment, the Temporal client config file's profile, the default.
func (cf *connFlags) resolve(env envconfig.EnvLookup) (connection, error) {
	set := func(name string) bool { return cf.fs.Changed(name) }
	if v, ok := env.LookupEnv("TEMPORAL_TLS"); ok && v != "" {
		switch strings.ToLower(v) {
		case "1", "0", "true", "false":
		default:
			return connection{}, usageErrorf("TEMPORAL_TLS: %q is not one of true, false, 1, 0", v)
		}
	}
	req := envconfig.LoadClientConfigProfileOptions{EnvLookup: env}
	if set("config-file") {
		req.ConfigFilePath = cf.configFile
	}
	if set("profile") {
		req.ConfigFileProfile = cf.profile
	}
	p, err := envconfig.LoadClientConfigProfile(req)
	if err != nil {
		return connection{}, fmt.Errorf("load the Temporal client configuration: %w", err)
	}
	if set("address") {
		p.Address = cf.address
	}
	if set("namespace") {
		p.Namespace = cf.namespace
	}
	if set("api-key") {
		p.APIKey = cf.apiKey
	}
	if p.Address == "" {
		p.Address = defaultAddress
	}
	if p.Namespace == "" {
		p.Namespace = defaultNamespace
	}
	for _, name := range []string{"tls", "tls-cert-path", "tls-key-path", "tls-ca-path", "tls-server-name", "tls-disable-host-verification"} {
		if set(name) && p.TLS == nil {
			p.TLS = &envconfig.ClientConfigTLS{}
		}
	}
	if p.TLS != nil {
		if set("tls") {
			p.TLS.Disabled = !cf.tls
		}
		if set("tls-cert-path") {
			p.TLS.ClientCertPath, p.TLS.ClientCertData = cf.tlsCertPath, nil
		}
		if set("tls-key-path") {
			p.TLS.ClientKeyPath, p.TLS.ClientKeyData = cf.tlsKeyPath, nil
		}
		if set("tls-ca-path") {
			p.TLS.ServerCACertPath, p.TLS.ServerCACertData = cf.tlsCAPath, nil
		}
		if set("tls-server-name") {
			p.TLS.ServerName = cf.tlsServerName
		}
		if set("tls-disable-host-verification") {
			p.TLS.DisableHostVerification = cf.tlsDisableHostVerification
		}
	}
	tq := cf.taskQueue
	if !set("task-queue") {
		if v, ok := env.LookupEnv(envTaskQueue); ok && v != "" {
			tq = v
		}
	}
	if tq == "" {
		return connection{}, usageErrorf("--task-queue must not be empty")
	}
	if cf.timeout < 0 {
		return connection{}, usageErrorf("--timeout must not be negative, got %s", cf.timeout)
	}
	return connection{Profile: p, TaskQueue: tq}, nil
}

// appEnv serves envconfig from the app's environment.
type appEnv struct{ getenv func(string) string }

// LookupEnv returns a variable's value; an empty value counts as unset.
func (e appEnv) LookupEnv(k string) (string, bool) {
	v := e.getenv(k)
	return v, v != ""
}

// Environ returns the process environment.
func (e appEnv) Environ() []string { return os.Environ() }

// withClient resolves the connection, dials Temporal and runs fn with a
// sessionflow client under the command's context (bounded by --timeout).
func (a *app) withClient(cmd *cobra.Command, cf *connFlags, fn func(ctx context.Context, c *client.Client) error) error {
	return a.withClientOptions(cmd, cf, client.Options{}, fn)
}

// withClientOptions is withClient with client options (the task queue comes
// from the connection).
func (a *app) withClientOptions(cmd *cobra.Command, cf *connFlags, co client.Options, fn func(ctx context.Context, c *client.Client) error) error {
	conn, err := cf.resolve(appEnv{getenv: a.getenv})
	if err != nil {
		return err
	}
	opts, err := conn.Profile.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return fmt.Errorf("the Temporal client options: %w", err)
	}
	opts.Logger = tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx := cmd.Context()
	if cf.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cf.timeout)
		defer cancel()
	}
	tc, err := dialTemporal(ctx, opts)
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s (namespace %s): %w", conn.Profile.Address, conn.Profile.Namespace, err)
	}
	defer tc.Close()
	co.TaskQueue = conn.TaskQueue
	co.Namespace = conn.Profile.Namespace
	return fn(ctx, client.New(tc, co))
}

const lifecycleNote = `

Connection: --address (env TEMPORAL_ADDRESS, default ` + defaultAddress + `),
--namespace (env TEMPORAL_NAMESPACE, default ` + defaultNamespace + `), --task-queue (env
` + envTaskQueue + `, default ` + client.DefaultTaskQueue + `), TLS and API key flags or the
TEMPORAL_* variables and profiles file of the temporal CLI; a flag wins over
the environment, which wins over the profile.`

// newLifecycleCmds returns the lifecycle commands.
func newLifecycleCmds(a *app) []*cobra.Command {
	return []*cobra.Command{
		newCreateCmd(a),
		newResumeCmd(a),
		newAppendCmd(a),
		newDisposeCmd(a),
		newCancelCmd(a),
		newDescribeCmd(a),
		newListCmd(a),
		newLoopCmd(a),
		newHistoryCmd(a),
		newUnlockCmd(a),
		newDemoCmd(a),
	}
}

// createInput is a validated `create` command line.
type createInput struct {
	id, cwd, parent, seedFile string
	forkThrough               int64
	fork                      bool
}

// request builds the CreateSession request; the seed file is read here.
func (in createInput) request() (workflows.CreateSessionRequest, error) {
	req := workflows.CreateSessionRequest{SessionID: in.id, Meta: &workflows.SessionMeta{Cwd: in.cwd, ParentSession: in.parent}}
	if in.fork {
		req.Fork = &workflows.ForkSeed{ParentSessionID: in.parent, Count: in.forkThrough + 1}
		req.Meta.IsSeeded = true
		req.InheritedEventCount = req.Fork.Count
	}
	if in.seedFile != "" {
		seed, err := readSeed(in.seedFile)
		if err != nil {
			return req, err
		}
		req.Seed = seed
		if in.parent != "" && len(seed) > 0 {
			req.Meta.IsSeeded = true
			req.InheritedEventCount = int64(len(seed))
		}
		if err := checkSeed(seed, req.Meta.IsSeeded); err != nil {
			return req, usageErrorf("--seed %s: %w", in.seedFile, err)
		}
	}
	return req, nil
}

// checkSeed applies to a seed, followed by the end-seed marker the create
// stores after it, the rules the store applies at append, so a seed that
// would be refused is refused before anything reaches Temporal.
func checkSeed(seed []session.Event, seeded bool) error {
	suffix := session.CloneEvents(seed)
	if marker, due := session.EndSeedMarker(seed, seeded, session.EndSeedTime(seed, 0)); due {
		suffix = append(suffix, marker)
	}
	return session.CheckAppendable(session.Header{IsSeeded: seeded}, 0, suffix)
}

// validate checks the flags that do not need a server.
func (in *createInput) validate(fs *pflag.FlagSet) error {
	if err := requireID(in.id); err != nil {
		return err
	}
	in.fork = fs.Changed("fork-through")
	if in.fork {
		if in.parent == "" {
			return usageErrorf("--fork-through needs --parent: it names the session to fork")
		}
		if in.forkThrough < 0 {
			return usageErrorf("--fork-through must be a seq (0 or more), got %d", in.forkThrough)
		}
		if in.seedFile != "" {
			return usageErrorf("--seed and --fork-through are mutually exclusive")
		}
	}
	if in.parent == in.id {
		return usageErrorf("--parent must name another session than --id")
	}
	if in.cwd != "" {
		abs, err := filepath.Abs(in.cwd)
		if err != nil {
			return usageErrorf("--cwd: %w", err)
		}
		in.cwd = abs
	}
	return nil
}

// readSeed reads a JSONL seed file: the events of the new session from seq 0.
func readSeed(path string) ([]session.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("--seed: %w", err)
	}
	defer f.Close()
	seed := []session.Event{}
	br := bufio.NewReader(f)
	for lineNo := 1; ; lineNo++ {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, fmt.Errorf("--seed %s: %w", path, rerr)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			e, err := parseEventLine(trimmed)
			if err != nil {
				return nil, usageErrorf("--seed %s line %d: %w", path, lineNo, err)
			}
			seed = append(seed, e)
		}
		if rerr != nil {
			return seed, nil
		}
	}
}

func newCreateCmd(a *app) *cobra.Command {
	var in createInput
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "create --id ID [--cwd DIR] [--parent ID [--fork-through N]] [--seed FILE]",
		Short: "Create a session through Temporal and wait until it is live",
		Long: `Start a CreateSession workflow (workflow id session/<encoded ID>) and wait until the
session is live, then print it. A running workflow of the same id, or a stored
session of that id, fails with: session "<ID>" already exists.

--cwd records the working directory (a relative path is resolved against the
current directory). --parent records the session's parent. --fork-through N
forks the parent: the new session starts with a copy of the parent's events
with seqs 0..N (N+1 events), copied by the worker from the store. --seed FILE
instead gives the first events inline, as JSONL from seq 0 (bounded by the
batch limit); with --parent they are the inherited prefix.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := in.validate(cmd.Flags()); err != nil {
				return err
			}
			req, err := in.request()
			if err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				s, err := c.Create(ctx, req)
				if err != nil {
					return err
				}
				return a.printSession(s, asJSON)
			})
		},
	}
	conn = addConnFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&in.id, "id", "", "session id (required)")
	fs.StringVar(&in.cwd, "cwd", "", "working directory of the session")
	fs.StringVar(&in.parent, "parent", "", "id of the parent session")
	fs.Int64Var(&in.forkThrough, "fork-through", 0, "fork the parent through this seq (needs --parent)")
	fs.StringVar(&in.seedFile, "seed", "", "JSONL file of the first events")
	fs.BoolVar(&asJSON, "json", false, "print the live session as JSON")
	return cmd
}

func newResumeCmd(a *app) *cobra.Command {
	var id string
	var asJSON, keepDeadOwner bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "resume --id ID",
		Short: "Resume a stored session through Temporal and wait until it is live",
		Long: `Start a ResumeSession workflow (workflow id session/<encoded ID>) for a stored session
and wait until it is live, then print it. The workflow takes the session's
write lease, repairs a crashed tail (the interrupted turn is closed) and
continues the log. A running workflow of the same id fails with: session
"<ID>" already exists. A lease still held by an owner Temporal reports closed
(a terminated or timed-out workflow) is forfeited and the resume goes on;
--keep-dead-owner refuses with "already owned" instead (see unlock).` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				line := startElapsed(a.stderr, isTerminal(a.stderr), fmt.Sprintf("resuming %q (reading and repairing its log)", id), elapsedDelay, time.Second)
				req := workflows.ResumeSessionRequest{}
				if keepDeadOwner {
					forfeit := false
					req.ForfeitDeadOwner = &forfeit
				}
				s, err := c.Resume(ctx, id, req)
				line.stopElapsed()
				if err != nil {
					return err
				}
				return a.printSession(s, asJSON)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the live session as JSON")
	cmd.Flags().BoolVar(&keepDeadOwner, "keep-dead-owner", false, "refuse instead of forfeiting the lease of an owner Temporal reports closed")
	return cmd
}

// printSession prints a live session.
func (a *app) printSession(s *client.Session, asJSON bool) error {
	if asJSON {
		return writeJSON(a.stdout, s)
	}
	return renderSession(a.stdout, s)
}

// renderSession writes a live session as aligned text.
func renderSession(w io.Writer, s *client.Session) error {
	fmt.Fprintf(w, "session %q is live\n", s.SessionID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  workflow\t%s (run %s)\n", s.WorkflowID, s.RunID)
	fmt.Fprintf(tw, "  source\t%s\n", s.Source)
	fmt.Fprintf(tw, "  handle\t%s\n", s.Handle.HandleID)
	fmt.Fprintf(tw, "  cwd\t%s\n", orDash(s.Header.Cwd))
	if s.Header.ParentSession != "" {
		fmt.Fprintf(tw, "  parent\t%s\n", s.Header.ParentSession)
	}
	fmt.Fprintf(tw, "  next seq\t%d\n", s.NextSeq)
	fmt.Fprintf(tw, "  first live seq\t%d\n", s.FirstLiveSeq)
	fmt.Fprintf(tw, "  last turn\t%d\n", s.LastTurn)
	return tw.Flush()
}

// orDash renders an empty string as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newAppendCmd(a *app) *cobra.Command {
	var id string
	var maxBytes, maxEvents int
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "append --id ID",
		Short: "Append JSONL events from stdin to a live session",
		Long: `Append events read from stdin as JSONL, one event per line (blank lines are
skipped), to a live session through its Append update. Events carry their own
seqs, which must continue the session's. They are sent in batches of at most
--max-batch-bytes encoded bytes (at most the session's own limit) and
--batch-events events; each batch returns once it is durably stored. On a
terminal, a large input shows its progress on stderr.

A line that is not a valid event stops the command before its batch is sent;
the session refuses a batch whose seqs do not continue it with "append seq
mismatch". Batches stored before a failure stay stored.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			if maxBytes < 1 || maxBytes > workflows.MaxMaxBatchBytes {
				return usageErrorf("--max-batch-bytes must be between 1 and %d, got %d", workflows.MaxMaxBatchBytes, maxBytes)
			}
			if maxEvents < 1 {
				return usageErrorf("--batch-events must be at least 1, got %d", maxEvents)
			}
			co := client.Options{MaxBatchBytes: maxBytes, MaxBatchEvents: maxEvents}
			return a.withClientOptions(cmd, conn, co, func(ctx context.Context, c *client.Client) error {
				var (
					bar      *progress
					progress func(int64)
				)
				if isTerminal(a.stderr) {
					bar = newProgress(a.stderr, fmt.Sprintf("appending to session %q", id), inputSize(a.stdin))
					progress = bar.update
				}
				res, err := c.AppendStream(ctx, id, a.stdin, progress)
				if bar != nil {
					bar.finish()
				}
				if err != nil {
					if res.Events > 0 {
						return fmt.Errorf("%w (%d events from earlier batches were appended, next seq %d)", err, res.Events, res.NextSeq)
					}
					return err
				}
				if res.Events == 0 {
					_, err = fmt.Fprintf(a.stdout, "no events on stdin; session %q unchanged\n", id)
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "appended %d events to session %q in %d batches (next seq %d)\n", res.Events, id, res.Batches, res.NextSeq)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().IntVar(&maxBytes, "max-batch-bytes", workflows.DefaultMaxBatchBytes, "encoded bytes per Append batch, at most the session's limit")
	cmd.Flags().IntVar(&maxEvents, "batch-events", client.DefaultMaxBatchEvents, "events per Append batch")
	return cmd
}

func newDisposeCmd(a *app) *cobra.Command {
	var id string
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "dispose --id ID",
		Short: "Dispose a live session",
		Long: `Dispose a live session through its Dispose update: the dispose hook runs,
pending appends are stored, the write handle is closed and the workflow
completes. Several failures are reported together: agent "<ID>" disposal
failed: <m1>; <m2>.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				res, err := c.Dispose(ctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, res)
				}
				_, err = fmt.Fprintf(a.stdout, "disposed session %q (next seq %d)\n", id, res.NextSeq)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newCancelCmd(a *app) *cobra.Command {
	var id, reason string
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "cancel --id ID [--reason TEXT]",
		Short: "Abort a session being created or resumed (a live one is disposed)",
		Long: `Send the abort signal with --reason and cancel the session's workflow. Before
the session is live this aborts its creation or resume (rolled back; the
failure reads agent "<ID>" creation aborted); a live session is disposed. The
command returns once the request is delivered.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				if err := c.Cancel(ctx, id, reason); err != nil {
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "cancellation of session %q requested\n", id)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "abort reason")
	return cmd
}

func newDescribeCmd(a *app) *cobra.Command {
	var id string
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "describe --id ID [--json]",
		Short: "Describe a session's workflow",
		Long: `Query the session workflow's describe: phase (preparing, setup, committing,
live, disposing, closed), source, write handle, next seq, pending events,
published lifecycle entries, and the failure and failed compensations of a
rolled-back run. --json prints the query result as it is.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				d, err := c.Describe(ctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, d)
				}
				return renderDescription(a.stdout, d)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the description as JSON")
	return cmd
}

// renderDescription writes a Description as aligned text.
func renderDescription(w io.Writer, d workflows.Description) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "session\t%s\n", displayText(d.SessionID))
	fmt.Fprintf(tw, "phase\t%s\n", d.Phase)
	fmt.Fprintf(tw, "source\t%s\n", orDash(d.Source))
	handle := "-"
	if d.Handle != nil {
		state := "closed"
		if d.HandleOpen {
			state = "open"
		}
		handle = fmt.Sprintf("%s (%s, %s)", d.Handle.HandleID, d.Handle.Access, state)
	}
	fmt.Fprintf(tw, "handle\t%s\n", handle)
	fmt.Fprintf(tw, "next seq\t%d\n", d.NextSeq)
	fmt.Fprintf(tw, "pending events\t%d\n", d.PendingEvents)
	entries := make([]string, 0, len(d.Lifecycle))
	for _, e := range d.Lifecycle {
		if e.Source != "" {
			entries = append(entries, e.Type+" ("+e.Source+")")
		} else {
			entries = append(entries, e.Type)
		}
	}
	fmt.Fprintf(tw, "lifecycle\t%s\n", orDash(strings.Join(entries, ", ")))
	if d.Failure != nil {
		fmt.Fprintf(tw, "failure\t%s\n", errorInfoText(*d.Failure))
	}
	for _, c := range d.CompensationErrors {
		fmt.Fprintf(tw, "compensation error\t%s: %s\n", c.Step, errorInfoText(c.Error))
	}
	return tw.Flush()
}

// errorInfoText renders an ErrorInfo as "message (type)".
func errorInfoText(e workflows.ErrorInfo) string {
	if e.Type == "" {
		return e.Message
	}
	return e.Message + " (" + e.Type + ")"
}

func newListCmd(a *app) *cobra.Command {
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the running sessions",
		Long: `List the running session workflows through Temporal visibility (eventually
consistent: a session started or closed a moment ago may be missing or still
listed), sorted by session id: session id, phase, cwd, workflow type, start
time of the run. Sessions whose workflow carries the SessionId, SessionPhase
and SessionCwd search attributes are read from them (FROM "attributes");
others from the workflow id, the describe query and the start input (FROM
"describe"). --json prints one JSON array.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				list, err := c.List(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					if list == nil {
						list = []client.SessionSummary{}
					}
					return writeJSON(a.stdout, list)
				}
				return renderList(a.stdout, list)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON array")
	return cmd
}

// renderList writes running sessions as a table.
func renderList(w io.Writer, list []client.SessionSummary) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no running sessions")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tPHASE\tCWD\tWORKFLOW TYPE\tSTARTED\tFROM")
	for _, s := range list {
		phase := string(s.Phase)
		if phase == "" {
			phase = "?"
		}
		from := "attributes"
		if s.Source == client.SourceDescribe {
			from = "describe"
		}
		started := "-"
		if !s.StartTime.IsZero() {
			started = formatMillis(s.StartTime.UnixMilli())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", displayText(s.SessionID), phase, displayText(orDash(s.Cwd)), s.WorkflowType, started, from)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range list {
		if s.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", s.SessionID, s.Error)
		}
	}
	return nil
}

const loopLong = `Start and stop SessionLoop hosts. A loop runs as workflow loop/<LOOPID> on
the task queue; it starts its configured sessions as child workflows and, when
stopped, refuses new work, aborts the sessions still starting, disposes the
live ones and completes once all have settled.`

func newLoopCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "loop",
		Short: "Start and stop session loops",
		Long:  loopLong,
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	cmd.AddCommand(newLoopStartCmd(a), newLoopStopCmd(a))
	return cmd
}

func newLoopStartCmd(a *app) *cobra.Command {
	var id, config string
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "start --id LOOPID [--config FILE]",
		Short: "Start a session loop",
		Long: `Start a SessionLoop workflow (workflow id loop/<LOOPID>). --config FILE is
its input as JSON (docs/API.md, SessionLoopInput: agents,
maxParallelToolCalls, configuredAgentIdentities, hooks, options,
sessionTaskQueue); without it the loop starts with no configured agents. A
running loop of the same id fails with: loop "<LOOPID>" is already running.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			in, err := readLoopConfig(config)
			if err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				l, err := c.LoopStart(ctx, id, in)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "started loop %q: workflow %s (run %s)\n", id, l.WorkflowID, l.RunID)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "loop id (required)")
	cmd.Flags().StringVar(&config, "config", "", "JSON file of the loop's input")
	return cmd
}

// readLoopConfig reads a SessionLoopInput; unknown fields are refused, so a
// misspelt key is not silently dropped.
func readLoopConfig(path string) (workflows.SessionLoopInput, error) {
	var in workflows.SessionLoopInput
	if path == "" {
		return in, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return in, usageErrorf("--config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, usageErrorf("--config %s: %w", path, err)
	}
	if dec.More() {
		return in, usageErrorf("--config %s: more than one JSON value", path)
	}
	return in, nil
}

func newLoopStopCmd(a *app) *cobra.Command {
	var id string
	var noWait, asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "stop --id LOOPID [--no-wait] [--json]",
		Short: "Stop a session loop",
		Long: `Cancel the loop's workflow (deactivation) and wait until it completes, then
print its final description: every child session and how it settled.
--no-wait returns once the cancellation is requested.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				if err := c.LoopStop(ctx, id); err != nil {
					return err
				}
				if noWait {
					_, err := fmt.Fprintf(a.stdout, "stop of loop %q requested\n", id)
					return err
				}
				d, err := c.LoopResult(ctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, d)
				}
				return renderLoop(a.stdout, id, d)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "loop id (required)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the stop is requested")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the final description as JSON")
	return cmd
}

// renderLoop writes a loop's final description.
func renderLoop(w io.Writer, id string, d workflows.LoopDescription) error {
	fmt.Fprintf(w, "loop %q stopped: %d sessions\n", id, len(d.Children))
	if len(d.Children) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tKIND\tCONFIG\tSTATE\tWAS LIVE\tERROR")
		for _, c := range d.Children {
			errText := "-"
			if c.Error != nil {
				errText = errorInfoText(*c.Error)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\n", displayText(c.SessionID), c.Kind, displayText(orDash(c.ConfigID)), c.State, c.WasLive, errText)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, f := range d.ConfigStartFailures {
		fmt.Fprintf(w, "config start failed: agent %q: %s of %q: %s\n", f.ConfigID, f.Mode, f.SessionID, errorInfoText(f.Error))
	}
	return nil
}

func newHistoryCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Export workflow histories",
		Long:  "Export workflow histories as JSON, for replay fixtures.",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	cmd.AddCommand(newHistoryExportCmd(a))
	return cmd
}

func newHistoryExportCmd(a *app) *cobra.Command {
	var id, workflowID, runID, out string
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "export --id ID --out FILE [--run-id RUNID]",
		Short: "Export a session workflow's history as JSON",
		Long: `Write the history of the session's workflow (session/<ID>), or of any
--workflow-id (a loop's: loop/<LOOPID>), as JSON in the format
worker.NewWorkflowReplayer().ReplayWorkflowHistoryFromJSONFile reads, for
replay fixtures. The latest run unless
--run-id is given (continue-as-new makes one history per run). --out - writes
to stdout; a file is written whole or not at all.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case id == "" && workflowID == "":
				return usageErrorf("--id or --workflow-id is required")
			case id != "" && workflowID != "":
				return usageErrorf("--id and --workflow-id are mutually exclusive")
			case out == "":
				return usageErrorf("--out is required (- for stdout)")
			}
			if id != "" {
				workflowID = workflows.WorkflowID(id)
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				if out == "-" {
					_, err := c.ExportWorkflowHistory(ctx, workflowID, runID, a.stdout)
					return err
				}
				n, err := exportToFile(ctx, c, workflowID, runID, out)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "exported %d events of workflow %s to %s\n", n, workflowID, out)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id")
	cmd.Flags().StringVar(&workflowID, "workflow-id", "", "workflow id, instead of --id")
	cmd.Flags().StringVar(&runID, "run-id", "", "run id (default: the latest run)")
	cmd.Flags().StringVar(&out, "out", "", "output file, - for stdout (required)")
	return cmd
}

// exportToFile writes the history to a temporary file beside path and
// renames it into place once complete.
func exportToFile(ctx context.Context, c *client.Client, workflowID, runID, path string) (int, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("--out: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	n, err := c.ExportWorkflowHistory(ctx, workflowID, runID, tmp)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("--out: %w", cerr)
	}
	if err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("--out: %w", err)
	}
	return n, nil
}

func newUnlockCmd(a *app) *cobra.Command {
	var id string
	var force bool
	sf := &storeFlags{}
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "unlock --id ID [--force]",
		Short: "Forfeit the write lease of a session whose owner is gone",
		Long: `Remove a session's write lease left behind by an owner that is gone, after
checking through Temporal that no execution of the owning workflow id is
running (looked up without a run id: continue-as-new changes it). The lease's
handle id is revoked, so the old owner can never write again; a session that
was created but never written is erased. A lease taken by a "log" command
cannot be checked through Temporal and needs --force.

--force skips the check and does not contact Temporal (as log unlock --force).
The store is --root DIR (env ` + envRoot + `) with --compression none|zstd (env
` + envCompression + `, default zstd).` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			st, err := a.openStore(sf)
			if err != nil {
				return err
			}
			if force {
				lease, err := st.ForceUnlock(cmd.Context(), id)
				if err != nil {
					return err
				}
				return a.printUnlocked(cmd.Context(), st, id, lease)
			}
			lease, err := st.LeaseOf(cmd.Context(), id)
			if errors.Is(err, jsonl.ErrCorrupt) {
				return fmt.Errorf("session %q: its lease cannot be read (%w), so Temporal cannot tell whether its owner is gone; once the owner is known to be gone, pass --force", id, err)
			}
			if err != nil {
				return err
			}
			if lease == nil {
				return a.printUnlocked(cmd.Context(), st, id, nil)
			}
			if lease.Owner.WorkflowID == cliWorkflowID {
				return fmt.Errorf("session %q is leased by a starter log command (host %q, pid %d), which Temporal cannot check; once that process is gone, pass --force",
					id, lease.Host, lease.PID)
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				removed, err := c.Unlock(ctx, st, id)
				if err != nil {
					return err
				}
				return a.printUnlocked(ctx, st, id, removed)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&force, "force", false, "remove the lease without checking its owner through Temporal")
	cmd.Flags().StringVar(&sf.root, "root", "", "store root directory (default $"+envRoot+")")
	cmd.Flags().StringVar(&sf.compression, "compression", "", "encoding of the root: none or zstd (default $"+envCompression+", else zstd)")
	return cmd
}

// printUnlocked reports a removed lease (nil: none was held). A session
// gone after its lease was removed was never written and has been erased
// (the lease alone cannot tell: it keeps the pending header it was created
// with).
func (a *app) printUnlocked(ctx context.Context, st *jsonl.Store, id string, lease *jsonl.Lease) error {
	if lease == nil {
		_, err := fmt.Fprintln(a.stdout, "no lease held")
		return err
	}
	fmt.Fprintf(a.stdout, "removed lease of session %q: %s\n", id, describeLease(lease))
	has, err := st.Has(ctx, id)
	if err != nil {
		return err
	}
	if !has {
		fmt.Fprintf(a.stdout, "session %q was never written; it was erased\n", id)
	}
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// inputSize is the size of a regular file behind r, 0 when unknown.
func inputSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return 0
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// Progress display settings.
const (
	progressMinBytes = 1 << 20                // smaller inputs show no progress
	progressInterval = 100 * time.Millisecond // between two redraws
)

// progress redraws one status line on a terminal.
type progress struct {
	w        io.Writer
	label    string
	total    int64 // 0 when unknown
	now      func() time.Time
	interval time.Duration
	last     time.Time
	done     int64
	width    int // of the line drawn, to blank it when it shrinks
}

// newProgress returns a progress line for an input of total bytes (0 when
// unknown).
func newProgress(w io.Writer, label string, total int64) *progress {
	return &progress{w: w, label: label, total: total, now: time.Now, interval: progressInterval}
}

// update records done bytes and redraws when the input is large and the
// last redraw is old enough.
func (p *progress) update(done int64) {
	p.done = done
	if done < progressMinBytes && p.total < progressMinBytes {
		return
	}
	if t := p.now(); p.width == 0 || t.Sub(p.last) >= p.interval {
		p.last = t
		p.draw()
	}
}

// finish draws the final state and ends the line, if anything was drawn.
func (p *progress) finish() {
	if p.width == 0 {
		return
	}
	p.draw()
	fmt.Fprintln(p.w)
}

func (p *progress) draw() {
	line := p.label + ": " + humanBytes(p.done)
	if p.total > 0 {
		line += fmt.Sprintf(" of %s (%d%%)", humanBytes(p.total), p.done*100/p.total)
	}
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.width = len(line)
}

// humanBytes renders a byte count in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	tlog "go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/telemetry"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
	"github.com/sessionflow/sessionflow/session"
)

// Connection defaults and the environment variable of the task queue; the
// other settings come from Temporal's own environment variables
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*,
// TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE, TEMPORAL_GRPC_META_*), read through
// go.temporal.io/sdk/contrib/envconfig as the temporal CLI reads them.
const (
	defaultAddress   = temporalconn.DefaultAddress
	defaultNamespace = temporalconn.DefaultNamespace
	envTaskQueue     = "SESSIONFLOW_TASK_QUEUE"
)

// dialTemporal connects to Temporal; tests replace it.
var dialTemporal = temporalclient.DialContext

// connFlags are the Temporal connection flags of a lifecycle command.
type connFlags struct {
	fs   *pflag.FlagSet
	conn *temporalconn.Flags

	taskQueue string
	timeout   time.Duration
	// shards and onShard are --shard and --on-shard (shards.go).
	shards  []string
	onShard string
}

// addConnFlags defines the connection flags on cmd.
func addConnFlags(cmd *cobra.Command) *connFlags {
	fs := cmd.Flags()
	cf := &connFlags{fs: fs, conn: temporalconn.AddPFlags(fs)}
	fs.StringVar(&cf.taskQueue, "task-queue", client.DefaultTaskQueue, "task queue of the session workflows (env "+envTaskQueue+")")
	fs.DurationVar(&cf.timeout, "timeout", 0, "give up after this long, e.g. 30s (default: wait as long as it takes)")
	cf.addShardFlags()
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
	p, err := cf.conn.Profile(env)
	var ee *temporalconn.EnvError
	if errors.As(err, &ee) {
		return connection{}, &usageError{err: err}
	}
	if err != nil {
		return connection{}, err
	}
	tq := cf.taskQueue
	if !cf.fs.Changed("task-queue") {
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
	router, err := cf.router(a.getenv)
	if err != nil {
		return err
	}
	opts, err := temporalconn.ClientOptions(conn.Profile)
	if err != nil {
		return err
	}
	opts.Logger = tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx := cmd.Context()
	if cf.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cf.timeout)
		defer cancel()
	}
	tr, err := telemetry.New(ctx, telemetry.Options{LookupEnv: appEnv{getenv: a.getenv}.LookupEnv, ServiceName: "sessionflow-starter"})
	if err != nil {
		return err
	}
	defer func() {
		// Flush the command's spans, bounded so that an unreachable
		// collector does not hold the command.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(sctx)
	}()
	opts.Interceptors = append(opts.Interceptors, tr.ClientInterceptors()...)
	tc, err := dialTemporal(ctx, opts)
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s (namespace %s): %w", conn.Profile.Address, conn.Profile.Namespace, err)
	}
	defer tc.Close()
	co.TaskQueue = conn.TaskQueue
	co.Namespace = conn.Profile.Namespace
	co.Router = router
	// The client leaves the event rules to the session's validator; the
	// starter refuses a bad line before its batch is sent, with its number.
	co.ParseLine = session.ParseAppendLineWire
	return fn(ctx, client.New(tc, co))
}

const lifecycleNote = `

Connection: --address (env TEMPORAL_ADDRESS, default ` + defaultAddress + `),
--namespace (env TEMPORAL_NAMESPACE, default ` + defaultNamespace + `), --task-queue (env
` + envTaskQueue + `, default ` + client.DefaultTaskQueue + `), TLS and API key flags or the
TEMPORAL_* variables and profiles file of the temporal CLI; a flag wins over
the environment, which wins over the profile.` + shardsNote

// newLifecycleCmds returns the lifecycle commands.
func newLifecycleCmds(a *app) []*cobra.Command {
	return []*cobra.Command{
		newCreateCmd(a),
		newResumeCmd(a),
		newForkCmd(a),
		newAppendCmd(a),
		newDisposeCmd(a),
		newCancelCmd(a),
		newTurnCmd(a),
		newCompactCmd(a),
		newApprovalsCmd(a),
		newApproveCmd(a),
		newRejectCmd(a),
		newPermissionsCmd(a),
		newChatCmd(a),
		newDescribeCmd(a),
		newListCmd(a),
		newLoopCmd(a),
		newHistoryCmd(a),
		newUnlockCmd(a),
		newDemoCmd(a),
		newRouteCmd(a),
		newServeCmd(a),
	}
}

// withID is withClient for a command acting on one session or loop: it
// refuses a missing or malformed id before connecting.
func (a *app) withID(cmd *cobra.Command, cf *connFlags, id string, fn func(ctx context.Context, c *client.Client) error) error {
	if err := requireID(id); err != nil {
		return err
	}
	return a.withClient(cmd, cf, fn)
}

// printResult writes v to stdout: as JSON under --json, otherwise as the
// text that render writes.
func printResult[T any](a *app, asJSON bool, v T, render func(io.Writer, T) error) error {
	if asJSON {
		return writeJSON(a.stdout, v)
	}
	return render(a.stdout, v)
}

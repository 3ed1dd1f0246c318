package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	tlog "go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/client"
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

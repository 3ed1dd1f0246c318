package workerapp

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/sessionflow/sessionflow/jsonl"
)

// isolated is an environment that reads no Temporal config file of the
// machine, plus extra entries.
func isolated(t *testing.T, extra ...string) []string {
	t.Helper()
	return append([]string{"TEMPORAL_CONFIG_FILE=" + filepath.Join(t.TempDir(), "absent.toml")}, extra...)
}

func TestParseArgsDefaults(t *testing.T) {
	cfg, err := ParseArgs(nil, isolated(t))
	require.NoError(t, err)
	want := DefaultConfig()
	assert.Equal(t, want, cfg)
	assert.Equal(t, "localhost:7233", cfg.Connection.Address)
	assert.Equal(t, "default", cfg.Connection.Namespace)
	assert.Nil(t, cfg.Connection.TLS)
	assert.Equal(t, "sessionflow", cfg.TaskQueue)
	assert.Equal(t, "./.sessionflow/store", cfg.StoreRoot)
	assert.Equal(t, jsonl.CompressionZstd, cfg.Compression)
	assert.Equal(t, time.Duration(0), cfg.AppendWindow, "group commit by default")
	assert.Equal(t, ":9090", cfg.MetricsAddress)
	assert.Equal(t, 30*time.Second, cfg.StopTimeout)
	assert.Zero(t, cfg.MaxConcurrentActivities)
	assert.Zero(t, cfg.MaxConcurrentWorkflowTasks)
	assert.Equal(t, time.Second, cfg.StickyTimeout, "sessionflow's default, not the SDK's 5s")
}

// fullEnv sets every variable the worker reads.
func fullEnv(t *testing.T) []string {
	return isolated(t,
		"TEMPORAL_ADDRESS=temporal.example:7233",
		"TEMPORAL_NAMESPACE=prod",
		"TEMPORAL_TLS=true",
		"TEMPORAL_TLS_SERVER_NAME=temporal.example",
		"SESSIONFLOW_TASK_QUEUE=tq-env",
		"SESSIONFLOW_ROOT=/var/lib/sessionflow",
		"SESSIONFLOW_COMPRESSION=none",
		"SESSIONFLOW_APPEND_WINDOW=1s",
		"SESSIONFLOW_MAX_CONCURRENT_ACTIVITIES=7",
		"SESSIONFLOW_MAX_CONCURRENT_WORKFLOW_TASKS=3",
		"SESSIONFLOW_METRICS_ADDRESS=127.0.0.1:9999",
		"SESSIONFLOW_STOP_TIMEOUT=45s",
		"SESSIONFLOW_STICKY_TIMEOUT=3s",
		"SESSIONFLOW_WORKER_IDENTITY=env-worker",
	)
}

func TestParseArgsEnvironment(t *testing.T) {
	cfg, err := ParseArgs(nil, fullEnv(t))
	require.NoError(t, err)
	assert.Equal(t, "temporal.example:7233", cfg.Connection.Address)
	assert.Equal(t, "prod", cfg.Connection.Namespace)
	require.NotNil(t, cfg.Connection.TLS)
	assert.False(t, cfg.Connection.TLS.Disabled)
	assert.Equal(t, "temporal.example", cfg.Connection.TLS.ServerName)
	assert.Equal(t, "tq-env", cfg.TaskQueue)
	assert.Equal(t, "/var/lib/sessionflow", cfg.StoreRoot)
	assert.Equal(t, jsonl.CompressionNone, cfg.Compression)
	assert.Equal(t, time.Second, cfg.AppendWindow)
	assert.Equal(t, 7, cfg.MaxConcurrentActivities)
	assert.Equal(t, 3, cfg.MaxConcurrentWorkflowTasks)
	assert.Equal(t, "127.0.0.1:9999", cfg.MetricsAddress)
	assert.Equal(t, 45*time.Second, cfg.StopTimeout)
	assert.Equal(t, 3*time.Second, cfg.StickyTimeout)
	assert.Equal(t, "env-worker", cfg.Identity)
}

func TestParseArgsFlagsOverrideEnvironment(t *testing.T) {
	cfg, err := ParseArgs([]string{
		"--address", "flag.example:7233",
		"--namespace", "staging",
		"--tls=false",
		"--task-queue", "tq-flag",
		"--store-root", "/srv/store",
		"--compression", "zstd",
		"--append-window", "50ms",
		"--max-concurrent-activities", "11",
		"--max-concurrent-workflow-tasks", "5",
		"--metrics-address", ":9191",
		"--stop-timeout", "2m",
		"--sticky-timeout", "1500ms",
		"--identity", "flag-worker",
	}, fullEnv(t))
	require.NoError(t, err)
	assert.Equal(t, "flag.example:7233", cfg.Connection.Address)
	assert.Equal(t, "staging", cfg.Connection.Namespace)
	require.NotNil(t, cfg.Connection.TLS)
	assert.True(t, cfg.Connection.TLS.Disabled, "--tls=false beats TEMPORAL_TLS=true")
	assert.Equal(t, "tq-flag", cfg.TaskQueue)
	assert.Equal(t, "/srv/store", cfg.StoreRoot)
	assert.Equal(t, jsonl.CompressionZstd, cfg.Compression)
	assert.Equal(t, 50*time.Millisecond, cfg.AppendWindow)
	assert.Equal(t, 11, cfg.MaxConcurrentActivities)
	assert.Equal(t, 5, cfg.MaxConcurrentWorkflowTasks)
	assert.Equal(t, ":9191", cfg.MetricsAddress)
	assert.Equal(t, 2*time.Minute, cfg.StopTimeout)
	assert.Equal(t, 1500*time.Millisecond, cfg.StickyTimeout)
	assert.Equal(t, "flag-worker", cfg.Identity)
}

func TestParseArgsFormat(t *testing.T) {
	cfg, err := ParseArgs(nil, isolated(t, "SESSIONFLOW_FORMAT=v0"))
	require.NoError(t, err)
	assert.Equal(t, jsonl.FormatV0, cfg.Format)
	cfg, err = ParseArgs([]string{"--format", "v3"}, isolated(t, "SESSIONFLOW_FORMAT=v0"))
	require.NoError(t, err)
	assert.Equal(t, jsonl.FormatV3, cfg.Format, "the flag beats the environment")
}

func TestParseArgsFlagEqualToDefaultStillWins(t *testing.T) {
	cfg, err := ParseArgs([]string{"--task-queue", DefaultTaskQueue, "--address", DefaultAddress}, fullEnv(t))
	require.NoError(t, err)
	assert.Equal(t, DefaultTaskQueue, cfg.TaskQueue)
	assert.Equal(t, DefaultAddress, cfg.Connection.Address)
}

func TestParseArgsMetricsOff(t *testing.T) {
	cfg, err := ParseArgs(nil, isolated(t, "SESSIONFLOW_METRICS_ADDRESS="))
	require.NoError(t, err)
	assert.Empty(t, cfg.MetricsAddress, "a set but empty variable turns metrics off")

	cfg, err = ParseArgs([]string{"--metrics-address="}, isolated(t, "SESSIONFLOW_METRICS_ADDRESS=:9999"))
	require.NoError(t, err)
	assert.Empty(t, cfg.MetricsAddress)
}

func TestParseArgsProfileFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(file, []byte(`
[profile.default]
address = "default.example:7233"

[profile.cloud]
address = "cloud.example:7233"
namespace = "cloud-ns"
api_key = "secret"

[profile.cloud.tls]
server_name = "cloud.example"
`), 0o600))

	cfg, err := ParseArgs(nil, []string{"TEMPORAL_CONFIG_FILE=" + file})
	require.NoError(t, err)
	assert.Equal(t, "default.example:7233", cfg.Connection.Address)
	assert.Equal(t, DefaultNamespace, cfg.Connection.Namespace)

	cfg, err = ParseArgs(nil, []string{"TEMPORAL_CONFIG_FILE=" + file, "TEMPORAL_PROFILE=cloud"})
	require.NoError(t, err)
	assert.Equal(t, "cloud.example:7233", cfg.Connection.Address)
	assert.Equal(t, "cloud-ns", cfg.Connection.Namespace)
	assert.Equal(t, "secret", cfg.Connection.APIKey)
	require.NotNil(t, cfg.Connection.TLS)
	assert.Equal(t, "cloud.example", cfg.Connection.TLS.ServerName)
	opts, err := cfg.Connection.ToClientOptions(envconfig.ToClientOptionsRequest{})
	require.NoError(t, err)
	assert.NotNil(t, opts.ConnectionOptions.TLS, "an API key profile connects with TLS")
	assert.NotNil(t, opts.Credentials)

	// The environment beats the file, a flag beats the environment.
	cfg, err = ParseArgs([]string{"--config-file", file, "--profile", "cloud", "--namespace", "flag-ns"},
		[]string{"TEMPORAL_ADDRESS=env.example:7233", "TEMPORAL_NAMESPACE=env-ns"})
	require.NoError(t, err)
	assert.Equal(t, "env.example:7233", cfg.Connection.Address)
	assert.Equal(t, "flag-ns", cfg.Connection.Namespace)
	assert.Equal(t, "secret", cfg.Connection.APIKey)

	_, err = ParseArgs([]string{"--config-file", file, "--profile", "missing"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing")
}

func TestParseArgsTLSFlags(t *testing.T) {
	cfg, err := ParseArgs([]string{
		"--tls-cert-path", "/c.pem", "--tls-key-path", "/k.pem", "--tls-ca-path", "/ca.pem",
		"--tls-server-name", "srv", "--tls-disable-host-verification", "--api-key", "k",
	}, isolated(t))
	require.NoError(t, err)
	require.NotNil(t, cfg.Connection.TLS)
	assert.Equal(t, envconfig.ClientConfigTLS{
		ClientCertPath: "/c.pem", ClientKeyPath: "/k.pem", ServerCACertPath: "/ca.pem",
		ServerName: "srv", DisableHostVerification: true,
	}, *cfg.Connection.TLS)
	assert.Equal(t, "k", cfg.Connection.APIKey)
}

func TestParseArgsRejectsBadValues(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"compression flag", []string{"--compression", "gzip"}, nil, "--compression"},
		{"compression env", nil, []string{"SESSIONFLOW_COMPRESSION=lz4"}, "SESSIONFLOW_COMPRESSION"},
		{"format flag", []string{"--format", "v1"}, nil, "--format"},
		{"format env", nil, []string{"SESSIONFLOW_FORMAT=v2"}, "SESSIONFLOW_FORMAT"},
		{"window syntax", nil, []string{"SESSIONFLOW_APPEND_WINDOW=fast"}, "SESSIONFLOW_APPEND_WINDOW"},
		{"window negative", []string{"--append-window", "-1s"}, nil, "--append-window"},
		{"activities syntax", nil, []string{"SESSIONFLOW_MAX_CONCURRENT_ACTIVITIES=many"}, "SESSIONFLOW_MAX_CONCURRENT_ACTIVITIES"},
		{"activities negative", []string{"--max-concurrent-activities", "-2"}, nil, "--max-concurrent-activities"},
		{"workflow tasks negative", nil, []string{"SESSIONFLOW_MAX_CONCURRENT_WORKFLOW_TASKS=-1"}, "SESSIONFLOW_MAX_CONCURRENT_WORKFLOW_TASKS"},
		{"stop timeout", []string{"--stop-timeout", "soon"}, nil, "--stop-timeout"},
		{"sticky timeout negative", nil, []string{"SESSIONFLOW_STICKY_TIMEOUT=-1s"}, "SESSIONFLOW_STICKY_TIMEOUT"},
		{"empty task queue", []string{"--task-queue", ""}, nil, "task queue"},
		{"empty store root", []string{"--store-root", ""}, nil, "store root"},
		{"metrics address", []string{"--metrics-address", "nohostport"}, nil, "metrics address"},
		{"unknown flag", []string{"--frobnicate"}, nil, "frobnicate"},
		{"positional", []string{"extra"}, nil, "unexpected arguments"},
		{"bad TEMPORAL_TLS", nil, []string{"TEMPORAL_TLS=maybe"}, "TEMPORAL_TLS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseArgs(c.args, isolated(t, c.env...))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	bad := DefaultConfig()
	bad.Connection.Address = ""
	assert.ErrorContains(t, bad.Validate(), "address")
	bad = DefaultConfig()
	bad.Compression = "brotli"
	assert.Error(t, bad.Validate())
	bad = DefaultConfig()
	bad.StopTimeout = -time.Second
	assert.ErrorContains(t, bad.Validate(), "stop timeout")
}

// --http turns the HTTP API on (off by default); a non-loopback address
// needs a token, from --http-token or the environment.
func TestParseArgsHTTP(t *testing.T) {
	cfg, err := ParseArgs(nil, isolated(t))
	require.NoError(t, err)
	assert.Empty(t, cfg.HTTPAddress, "off by default")

	cfg, err = ParseArgs([]string{"--http", "8080"}, isolated(t))
	require.NoError(t, err)
	assert.Equal(t, "8080", cfg.HTTPAddress)
	assert.Empty(t, cfg.HTTPToken)

	_, err = ParseArgs([]string{"--http", "0.0.0.0:8080"}, isolated(t))
	require.Error(t, err)
	assert.Equal(t, "--http 0.0.0.0:8080: a bearer token is required to listen on an address that is not loopback (give --http-token or SESSIONFLOW_HTTP_TOKEN)", err.Error())

	cfg, err = ParseArgs([]string{"--http", "0.0.0.0:8080"}, isolated(t, "SESSIONFLOW_HTTP_TOKEN=t0k"))
	require.NoError(t, err)
	assert.Equal(t, "t0k", cfg.HTTPToken)
	cfg, err = ParseArgs([]string{"--http-token", "flag"}, isolated(t, "SESSIONFLOW_HTTP=9", "SESSIONFLOW_HTTP_TOKEN=env"))
	require.NoError(t, err)
	assert.Equal(t, "9", cfg.HTTPAddress)
	assert.Equal(t, "flag", cfg.HTTPToken)
}

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// temporalEnv lists the variables the lifecycle commands read.
var temporalEnv = []string{
	"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_PROFILE", "TEMPORAL_TLS",
	"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
	"TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", envTaskQueue,
}

// isolateEnv clears the connection environment (a server the machine points
// at must not leak in) and hides any Temporal profiles file.
func isolateEnv(t *testing.T) {
	t.Helper()
	for _, k := range temporalEnv {
		t.Setenv(k, "")
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "absent.toml"))
}

// stubDial replaces the Temporal dial for one test: it records the options
// and returns c, or fails when c is nil.
func stubDial(t *testing.T, c temporalclient.Client) *[]temporalclient.Options {
	t.Helper()
	var dialed []temporalclient.Options
	prev := dialTemporal
	dialTemporal = func(_ context.Context, o temporalclient.Options) (temporalclient.Client, error) {
		dialed = append(dialed, o)
		if c == nil {
			return nil, errors.New("dial refused by the test")
		}
		return c, nil
	}
	t.Cleanup(func() { dialTemporal = prev })
	return &dialed
}

// mapEnv is an environment for resolve.
type mapEnv map[string]string

func (m mapEnv) LookupEnv(k string) (string, bool) {
	v, ok := m[k]
	return v, ok
}

func (m mapEnv) Environ() []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// resolveArgs parses args as a lifecycle command's connection flags and
// resolves them against env.
func resolveArgs(t *testing.T, env mapEnv, args ...string) (connection, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "x"}
	cf := addConnFlags(cmd)
	require.NoError(t, cmd.Flags().Parse(args))
	if _, ok := env["TEMPORAL_CONFIG_FILE"]; !ok {
		env["TEMPORAL_CONFIG_FILE"] = filepath.Join(t.TempDir(), "absent.toml")
	}
	return cf.resolve(env)
}

func TestConnectionPrecedence(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(profile, []byte(`
[profile.default]
address = "profile-host:7233"
namespace = "profile-ns"

[profile.prod]
address = "prod-host:7233"
namespace = "prod-ns"
api_key = "prod-key"
`), 0o600))

	c, err := resolveArgs(t, mapEnv{})
	require.NoError(t, err)
	require.Equal(t, "localhost:7233", c.Profile.Address)
	require.Equal(t, "default", c.Profile.Namespace)
	require.Equal(t, "sessionflow", c.TaskQueue)
	require.Nil(t, c.Profile.TLS)

	// The profile file, then the environment, then the flags.
	c, err = resolveArgs(t, mapEnv{"TEMPORAL_CONFIG_FILE": profile})
	require.NoError(t, err)
	require.Equal(t, "profile-host:7233", c.Profile.Address)
	require.Equal(t, "profile-ns", c.Profile.Namespace)

	env := mapEnv{"TEMPORAL_CONFIG_FILE": profile, "TEMPORAL_ADDRESS": "env-host:1", "TEMPORAL_NAMESPACE": "env-ns", envTaskQueue: "env-q"}
	c, err = resolveArgs(t, env)
	require.NoError(t, err)
	require.Equal(t, "env-host:1", c.Profile.Address)
	require.Equal(t, "env-ns", c.Profile.Namespace)
	require.Equal(t, "env-q", c.TaskQueue)

	c, err = resolveArgs(t, env, "--address", "flag-host:2", "--namespace", "flag-ns", "--task-queue", "flag-q")
	require.NoError(t, err)
	require.Equal(t, "flag-host:2", c.Profile.Address)
	require.Equal(t, "flag-ns", c.Profile.Namespace)
	require.Equal(t, "flag-q", c.TaskQueue)

	// A flag equal to its default still wins over the environment.
	c, err = resolveArgs(t, env, "--address", "localhost:7233")
	require.NoError(t, err)
	require.Equal(t, "localhost:7233", c.Profile.Address)

	// --profile selects another profile; TEMPORAL_PROFILE does too.
	c, err = resolveArgs(t, mapEnv{"TEMPORAL_CONFIG_FILE": profile}, "--profile", "prod")
	require.NoError(t, err)
	require.Equal(t, "prod-host:7233", c.Profile.Address)
	require.Equal(t, "prod-key", c.Profile.APIKey)
	c, err = resolveArgs(t, mapEnv{"TEMPORAL_CONFIG_FILE": profile, "TEMPORAL_PROFILE": "prod"})
	require.NoError(t, err)
	require.Equal(t, "prod-ns", c.Profile.Namespace)
	_, err = resolveArgs(t, mapEnv{"TEMPORAL_CONFIG_FILE": profile}, "--profile", "nope")
	require.Error(t, err)
}

func TestConnectionTLS(t *testing.T) {
	c, err := resolveArgs(t, mapEnv{}, "--tls-ca-path", "/ca.pem", "--tls-server-name", "temporal.example")
	require.NoError(t, err)
	require.NotNil(t, c.Profile.TLS)
	require.False(t, c.Profile.TLS.Disabled)
	require.Equal(t, "/ca.pem", c.Profile.TLS.ServerCACertPath)
	require.Equal(t, "temporal.example", c.Profile.TLS.ServerName)

	c, err = resolveArgs(t, mapEnv{"TEMPORAL_TLS": "true"})
	require.NoError(t, err)
	require.NotNil(t, c.Profile.TLS)
	require.False(t, c.Profile.TLS.Disabled)
	c, err = resolveArgs(t, mapEnv{"TEMPORAL_TLS": "true"}, "--tls=false")
	require.NoError(t, err)
	require.True(t, c.Profile.TLS.Disabled, "the flag wins over TEMPORAL_TLS")

	c, err = resolveArgs(t, mapEnv{"TEMPORAL_API_KEY": "k"})
	require.NoError(t, err)
	require.Equal(t, "k", c.Profile.APIKey)
	opts, err := c.Profile.ToClientOptions(envconfig.ToClientOptionsRequest{})
	require.NoError(t, err)
	require.NotNil(t, opts.ConnectionOptions.TLS, "an API key turns TLS on")

	_, err = resolveArgs(t, mapEnv{"TEMPORAL_TLS": "maybe"})
	var ue *usageError
	require.ErrorAs(t, err, &ue)
	require.EqualError(t, err, `TEMPORAL_TLS: "maybe" is not one of true, false, 1, 0`)

	_, err = resolveArgs(t, mapEnv{}, "--task-queue", "")
	require.ErrorAs(t, err, &ue)
	_, err = resolveArgs(t, mapEnv{}, "--timeout", "-1s")
	require.ErrorAs(t, err, &ue)
}

func TestDialUsesResolvedConnection(t *testing.T) {
	isolateEnv(t)
	t.Setenv("TEMPORAL_NAMESPACE", "env-ns")
	dialed := stubDial(t, nil)
	r := runCLI(t, "", "describe", "--id", "s1", "--address", "h:1")
	mustFail(t, r, 1, "connect to Temporal at h:1 (namespace env-ns): dial refused by the test")
	require.NotContains(t, r.stderr, "--help", "a connection failure is not a usage error")
	require.Len(t, *dialed, 1)
	o := (*dialed)[0]
	require.Equal(t, "h:1", o.HostPort)
	require.Equal(t, "env-ns", o.Namespace)
	require.NotNil(t, o.Logger, "the SDK's default logger would print on stdout")
}

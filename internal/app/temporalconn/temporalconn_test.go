package temporalconn

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/contrib/envconfig"
)

const profileFile = `
[profile.default]
address = "profile-host:7233"
namespace = "profile-ns"
api_key = "profile-key"

[profile.prod]
address = "prod-host:7233"
namespace = "prod-ns"

[profile.prod.tls]
server_name = "prod.example"
`

func writeProfile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// binder parses args with the connection flags bound to one kind of flag set.
type binder struct {
	name  string
	parse func(t *testing.T, args []string) *Flags
}

var binders = []binder{
	{"flag", func(t *testing.T, args []string) *Flags {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := AddFlags(fs)
		require.NoError(t, fs.Parse(args))
		return f
	}},
	{"pflag", func(t *testing.T, args []string) *Flags {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := AddPFlags(fs)
		require.NoError(t, fs.Parse(args))
		return f
	}},
}

// resolve parses args and resolves them against environ; an environ without
// TEMPORAL_CONFIG_FILE gets an absent file, so the user's own does not count.
func resolve(t *testing.T, b binder, environ []string, args ...string) (envconfig.ClientConfigProfile, error) {
	t.Helper()
	env := NewEnv(environ)
	if _, ok := env.LookupEnv("TEMPORAL_CONFIG_FILE"); !ok {
		env = NewEnv(append([]string{"TEMPORAL_CONFIG_FILE=" + filepath.Join(t.TempDir(), "absent.toml")}, environ...))
	}
	return b.parse(t, args).Profile(env)
}

func TestPrecedenceFlagEnvProfile(t *testing.T) {
	file := writeProfile(t, profileFile)
	for _, b := range binders {
		t.Run(b.name, func(t *testing.T) {
			p, err := resolve(t, b, nil)
			require.NoError(t, err)
			assert.Equal(t, "localhost:7233", p.Address)
			assert.Equal(t, "default", p.Namespace)
			assert.Empty(t, p.APIKey)
			assert.Nil(t, p.TLS)

			fileOnly := []string{"TEMPORAL_CONFIG_FILE=" + file}
			p, err = resolve(t, b, fileOnly)
			require.NoError(t, err)
			assert.Equal(t, "profile-host:7233", p.Address)
			assert.Equal(t, "profile-ns", p.Namespace)
			assert.Equal(t, "profile-key", p.APIKey)

			withEnv := append(fileOnly, "TEMPORAL_ADDRESS=env-host:1", "TEMPORAL_NAMESPACE=env-ns", "TEMPORAL_API_KEY=env-key")
			p, err = resolve(t, b, withEnv)
			require.NoError(t, err)
			assert.Equal(t, "env-host:1", p.Address, "the environment beats the profile")
			assert.Equal(t, "env-ns", p.Namespace)
			assert.Equal(t, "env-key", p.APIKey)

			p, err = resolve(t, b, withEnv, "--address", "flag-host:2", "--namespace", "flag-ns", "--api-key", "flag-key")
			require.NoError(t, err)
			assert.Equal(t, "flag-host:2", p.Address, "a flag beats the environment")
			assert.Equal(t, "flag-ns", p.Namespace)
			assert.Equal(t, "flag-key", p.APIKey)

			// A flag given with its default value still beats the environment.
			p, err = resolve(t, b, withEnv, "--address", DefaultAddress)
			require.NoError(t, err)
			assert.Equal(t, "localhost:7233", p.Address)
			assert.Equal(t, "env-ns", p.Namespace, "an absent flag leaves the environment")

			// --profile beats TEMPORAL_PROFILE, --config-file beats TEMPORAL_CONFIG_FILE.
			p, err = resolve(t, b, []string{"TEMPORAL_CONFIG_FILE=" + file, "TEMPORAL_PROFILE=default"}, "--profile", "prod")
			require.NoError(t, err)
			assert.Equal(t, "prod-host:7233", p.Address)
			p, err = resolve(t, b, []string{"TEMPORAL_CONFIG_FILE=" + filepath.Join(t.TempDir(), "absent.toml")}, "--config-file", file)
			require.NoError(t, err)
			assert.Equal(t, "profile-host:7233", p.Address)
		})
	}
}

func TestTLSOptions(t *testing.T) {
	file := writeProfile(t, profileFile)
	for _, b := range binders {
		t.Run(b.name, func(t *testing.T) {
			p, err := resolve(t, b, nil, "--tls-server-name", "srv.example", "--tls-disable-host-verification")
			require.NoError(t, err)
			require.NotNil(t, p.TLS, "a TLS flag turns TLS on")
			opts, err := ClientOptions(p)
			require.NoError(t, err)
			require.NotNil(t, opts.ConnectionOptions.TLS)
			assert.Equal(t, "srv.example", opts.ConnectionOptions.TLS.ServerName)
			assert.True(t, opts.ConnectionOptions.TLS.InsecureSkipVerify)

			p, err = resolve(t, b, []string{"TEMPORAL_TLS=true"})
			require.NoError(t, err)
			opts, err = ClientOptions(p)
			require.NoError(t, err)
			assert.NotNil(t, opts.ConnectionOptions.TLS, "TEMPORAL_TLS=true turns TLS on")

			p, err = resolve(t, b, []string{"TEMPORAL_TLS=true"}, "--tls=false")
			require.NoError(t, err)
			opts, err = ClientOptions(p)
			require.NoError(t, err)
			assert.Nil(t, opts.ConnectionOptions.TLS, "--tls=false beats TEMPORAL_TLS=true")

			// The environment's server name beats the profile's, the flag beats both.
			prod := []string{"TEMPORAL_CONFIG_FILE=" + file, "TEMPORAL_PROFILE=prod"}
			p, err = resolve(t, b, prod)
			require.NoError(t, err)
			require.NotNil(t, p.TLS)
			assert.Equal(t, "prod.example", p.TLS.ServerName)
			p, err = resolve(t, b, append(prod, "TEMPORAL_TLS_SERVER_NAME=env.example"))
			require.NoError(t, err)
			assert.Equal(t, "env.example", p.TLS.ServerName)
			p, err = resolve(t, b, append(prod, "TEMPORAL_TLS_SERVER_NAME=env.example"), "--tls-server-name", "flag.example")
			require.NoError(t, err)
			assert.Equal(t, "flag.example", p.TLS.ServerName)

			p, err = resolve(t, b, nil, "--tls-ca-path", filepath.Join(t.TempDir(), "absent-ca.pem"))
			require.NoError(t, err)
			_, err = ClientOptions(p)
			require.Error(t, err, "an unreadable CA file is refused when the options are built")
			assert.Contains(t, err.Error(), "the Temporal client options")
		})
	}
}

func TestAPIKey(t *testing.T) {
	for _, b := range binders {
		t.Run(b.name, func(t *testing.T) {
			p, err := resolve(t, b, nil)
			require.NoError(t, err)
			opts, err := ClientOptions(p)
			require.NoError(t, err)
			assert.Nil(t, opts.Credentials)
			assert.Nil(t, opts.ConnectionOptions.TLS, "no key, no TLS")
			assert.Equal(t, "localhost:7233", opts.HostPort)
			assert.Equal(t, "default", opts.Namespace)

			p, err = resolve(t, b, nil, "--api-key", "secret")
			require.NoError(t, err)
			assert.Equal(t, "secret", p.APIKey)
			opts, err = ClientOptions(p)
			require.NoError(t, err)
			assert.NotNil(t, opts.Credentials, "an API key gives credentials")
			assert.NotNil(t, opts.ConnectionOptions.TLS, "an API key turns TLS on")

			p, err = resolve(t, b, []string{"TEMPORAL_API_KEY=secret"}, "--tls=false")
			require.NoError(t, err)
			opts, err = ClientOptions(p)
			require.NoError(t, err)
			assert.NotNil(t, opts.Credentials)
			assert.Nil(t, opts.ConnectionOptions.TLS, "--tls=false turns TLS off even with an API key")
		})
	}
}

func TestBadInputErrors(t *testing.T) {
	bad := writeProfile(t, "[profile.default\naddress = ")
	for _, b := range binders {
		t.Run(b.name, func(t *testing.T) {
			_, err := resolve(t, b, []string{"TEMPORAL_CONFIG_FILE=" + bad})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "loading the Temporal client configuration (file "+bad+")")
			assert.Contains(t, err.Error(), "failed parsing config")

			_, err = resolve(t, b, nil, "--config-file", bad, "--profile", "prod")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "(file "+bad+`, profile "prod")`)

			good := writeProfile(t, profileFile)
			_, err = resolve(t, b, []string{"TEMPORAL_CONFIG_FILE=" + good}, "--profile", "nope")
			require.Error(t, err)
			assert.Contains(t, err.Error(), `profile "nope"`)

			_, err = resolve(t, b, []string{"TEMPORAL_TLS=maybe"})
			var ee *EnvError
			require.True(t, errors.As(err, &ee), "got %v", err)
			assert.EqualError(t, err, `TEMPORAL_TLS: "maybe" is not one of true, false, 1, 0`)
			_, err = resolve(t, b, []string{"TEMPORAL_TLS=FALSE"})
			require.NoError(t, err, "the boolean is read case-insensitively")
		})
	}
}

func TestFlagNamesAreDefined(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	AddPFlags(fs)
	gfs := flag.NewFlagSet("x", flag.ContinueOnError)
	AddFlags(gfs)
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	assert.Len(t, FlagNames(), n)
	for _, name := range FlagNames() {
		assert.NotNil(t, fs.Lookup(name), name)
		assert.NotNil(t, gfs.Lookup(name), name)
	}
}

func TestFromEnv(t *testing.T) {
	file := writeProfile(t, profileFile)
	opts, err := FromEnv(NewEnv([]string{"TEMPORAL_CONFIG_FILE=" + filepath.Join(t.TempDir(), "absent.toml"), "TEMPORAL_ADDRESS=env-host:1"}))
	require.NoError(t, err)
	assert.Equal(t, "env-host:1", opts.HostPort)
	assert.Equal(t, "default", opts.Namespace, "an unset namespace takes the default")
	assert.Nil(t, opts.ConnectionOptions.TLS)

	opts, err = FromEnv(NewEnv([]string{"TEMPORAL_CONFIG_FILE=" + file, "TEMPORAL_PROFILE=prod", "TEMPORAL_NAMESPACE=env-ns"}))
	require.NoError(t, err)
	assert.Equal(t, "prod-host:7233", opts.HostPort)
	assert.Equal(t, "env-ns", opts.Namespace)
	require.NotNil(t, opts.ConnectionOptions.TLS)
	assert.Equal(t, "prod.example", opts.ConnectionOptions.TLS.ServerName)

	_, err = FromEnv(NewEnv([]string{"TEMPORAL_TLS=yes"}))
	var ee *EnvError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, "yes", ee.Value)
}

// Package temporalconn defines the Temporal connection settings of
// sessionflow's programs once: the command-line flags (address, namespace,
// API key, TLS, profile, config file), their precedence over Temporal's own
// environment variables and client config file, and the client.Options they
// produce.
//
// Precedence, highest first: a flag given on the command line, the
// environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
// TEMPORAL_TLS*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE,
// TEMPORAL_GRPC_META_*), the profile of the Temporal client config file, the
// default. The environment and the file are read through
// go.temporal.io/sdk/contrib/envconfig, as the temporal CLI reads them.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring (internal/app). It may import any package below the
// client's row, the client and the other program-wiring packages; only
// programs and tests import it.
package temporalconn

import (
	"flag"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	sfclient "github.com/sessionflow/sessionflow/client"
)

// Defaults of the connection.
const (
	DefaultAddress   = "localhost:7233"
	DefaultNamespace = "default"
)

// EnvTLS is the environment variable that turns TLS on or off.
const EnvTLS = "TEMPORAL_TLS"

// Names of the connection flags.
const (
	FlagAddress                    = "address"
	FlagNamespace                  = "namespace"
	FlagAPIKey                     = "api-key"
	FlagProfile                    = "profile"
	FlagConfigFile                 = "config-file"
	FlagTLS                        = "tls"
	FlagTLSCertPath                = "tls-cert-path"
	FlagTLSKeyPath                 = "tls-key-path"
	FlagTLSCAPath                  = "tls-ca-path"
	FlagTLSServerName              = "tls-server-name"
	FlagTLSDisableHostVerification = "tls-disable-host-verification"
)

// FlagNames lists the connection flags in the order they are defined.
func FlagNames() []string {
	return []string{
		FlagAddress, FlagNamespace, FlagAPIKey, FlagProfile, FlagConfigFile,
		FlagTLS, FlagTLSCertPath, FlagTLSKeyPath, FlagTLSCAPath, FlagTLSServerName,
		FlagTLSDisableHostVerification,
	}
}

var tlsFlags = []string{FlagTLS, FlagTLSCertPath, FlagTLSKeyPath, FlagTLSCAPath, FlagTLSServerName, FlagTLSDisableHostVerification}

// EnvError is an environment variable whose value cannot be read.
type EnvError struct {
	// Var is the variable's name and Value its value.
	Var, Value string
	// Want describes the accepted values.
	Want string
}

// Error names the variable, its value and what it accepts.
func (e *EnvError) Error() string {
	return fmt.Sprintf("%s: %q is not one of %s", e.Var, e.Value, e.Want)
}

// Flags are the connection flags. Bind them to a flag set with AddFlags or
// AddPFlags; after the set is parsed, Profile resolves them.
type Flags struct {
	changed func(name string) bool

	address, namespace, apiKey, profile, configFile   string
	tls, tlsDisableHostVerification                   bool
	tlsCertPath, tlsKeyPath, tlsCAPath, tlsServerName string
}

// define defines the flags through the definers of a flag set.
func (f *Flags) define(str func(p *string, name, value, usage string), boolean func(p *bool, name string, value bool, usage string)) {
	str(&f.address, FlagAddress, DefaultAddress, "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	str(&f.namespace, FlagNamespace, DefaultNamespace, "Temporal namespace (env TEMPORAL_NAMESPACE)")
	str(&f.apiKey, FlagAPIKey, "", "Temporal API key; enables TLS (env TEMPORAL_API_KEY)")
	str(&f.profile, FlagProfile, "", "profile of the Temporal client config file (env TEMPORAL_PROFILE)")
	str(&f.configFile, FlagConfigFile, "", "Temporal client config file, default <user config dir>/temporalio/temporal.toml (env TEMPORAL_CONFIG_FILE)")
	boolean(&f.tls, FlagTLS, false, "connect with TLS; --tls=false disables it (env "+EnvTLS+")")
	str(&f.tlsCertPath, FlagTLSCertPath, "", "client certificate for mTLS (env TEMPORAL_TLS_CLIENT_CERT_PATH)")
	str(&f.tlsKeyPath, FlagTLSKeyPath, "", "client key for mTLS (env TEMPORAL_TLS_CLIENT_KEY_PATH)")
	str(&f.tlsCAPath, FlagTLSCAPath, "", "server CA certificate (env TEMPORAL_TLS_SERVER_CA_CERT_PATH)")
	str(&f.tlsServerName, FlagTLSServerName, "", "TLS server name override (env TEMPORAL_TLS_SERVER_NAME)")
	boolean(&f.tlsDisableHostVerification, FlagTLSDisableHostVerification, false, "skip TLS host verification (env TEMPORAL_TLS_DISABLE_HOST_VERIFICATION)")
}

// AddFlags defines the connection flags on a standard library flag set.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	f.define(fs.StringVar, fs.BoolVar)
	f.changed = func(name string) bool {
		found := false
		fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
		return found
	}
	return f
}

// AddPFlags defines the connection flags on a pflag (cobra) flag set.
func AddPFlags(fs *pflag.FlagSet) *Flags {
	f := &Flags{}
	f.define(fs.StringVar, fs.BoolVar)
	f.changed = fs.Changed
	return f
}

// Profile resolves the parsed flags against env: it loads the client config
// file's profile and the TEMPORAL_* variables through envconfig, then applies
// the flags given on the command line, then the defaults. A TEMPORAL_TLS that
// is not a boolean is an *EnvError.
func (f *Flags) Profile(env envconfig.EnvLookup) (envconfig.ClientConfigProfile, error) {
	// envconfig ignores a TEMPORAL_TLS it cannot read; refuse it instead.
	if v, ok := env.LookupEnv(EnvTLS); ok && v != "" {
		switch strings.ToLower(v) {
		case "1", "0", "true", "false":
		default:
			return envconfig.ClientConfigProfile{}, &EnvError{Var: EnvTLS, Value: v, Want: "true, false, 1, 0"}
		}
	}
	set := f.changed
	req := envconfig.LoadClientConfigProfileOptions{EnvLookup: env}
	if set(FlagConfigFile) {
		req.ConfigFilePath = f.configFile
	}
	if set(FlagProfile) {
		req.ConfigFileProfile = f.profile
	}
	p, err := envconfig.LoadClientConfigProfile(req)
	if err != nil {
		return envconfig.ClientConfigProfile{}, fmt.Errorf("loading the Temporal client configuration%s: %w", source(req, env), err)
	}
	if set(FlagAddress) {
		p.Address = f.address
	}
	if set(FlagNamespace) {
		p.Namespace = f.namespace
	}
	if set(FlagAPIKey) {
		p.APIKey = f.apiKey
	}
	if p.Address == "" {
		p.Address = DefaultAddress
	}
	if p.Namespace == "" {
		p.Namespace = DefaultNamespace
	}
	for _, name := range tlsFlags {
		if set(name) && p.TLS == nil {
			p.TLS = &envconfig.ClientConfigTLS{}
		}
	}
	if p.TLS != nil {
		if set(FlagTLS) {
			p.TLS.Disabled = !f.tls
		}
		if set(FlagTLSCertPath) {
			p.TLS.ClientCertPath, p.TLS.ClientCertData = f.tlsCertPath, nil
		}
		if set(FlagTLSKeyPath) {
			p.TLS.ClientKeyPath, p.TLS.ClientKeyData = f.tlsKeyPath, nil
		}
		if set(FlagTLSCAPath) {
			p.TLS.ServerCACertPath, p.TLS.ServerCACertData = f.tlsCAPath, nil
		}
		if set(FlagTLSServerName) {
			p.TLS.ServerName = f.tlsServerName
		}
		if set(FlagTLSDisableHostVerification) {
			p.TLS.DisableHostVerification = f.tlsDisableHostVerification
		}
	}
	return p, nil
}

// source names the config file and profile of req for an error message,
// as far as the flags or the environment give them.
func source(req envconfig.LoadClientConfigProfileOptions, env envconfig.EnvLookup) string {
	file, profile := req.ConfigFilePath, req.ConfigFileProfile
	if file == "" {
		file, _ = env.LookupEnv("TEMPORAL_CONFIG_FILE")
	}
	if profile == "" {
		profile, _ = env.LookupEnv("TEMPORAL_PROFILE")
	}
	var parts []string
	if file != "" {
		parts = append(parts, "file "+file)
	}
	if profile != "" {
		parts = append(parts, fmt.Sprintf("profile %q", profile))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// FromEnv resolves the connection from env alone, as Profile does when no
// flag is given, and returns its client options.
func FromEnv(env envconfig.EnvLookup) (client.Options, error) {
	p, err := (&Flags{changed: func(string) bool { return false }}).Profile(env)
	if err != nil {
		return client.Options{}, err
	}
	return ClientOptions(p)
}

// ClientOptions returns the client options of a resolved profile: host,
// namespace, credentials, TLS and gRPC metadata, and sessionflow's dial
// option (an update refused while a session continues as new is sent again
// at once: sessionflow's client.RetryClosingInterceptor). Callers add their
// logger, identity and metrics.
func ClientOptions(p envconfig.ClientConfigProfile) (client.Options, error) {
	opts, err := p.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("the Temporal client options: %w", err)
	}
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, sfclient.DialOption())
	return opts, nil
}

// Env serves envconfig from KEY=VALUE entries, as os.Environ returns them.
// A variable set to the empty string counts as set.
type Env struct {
	environ []string
	vars    map[string]string
}

var _ envconfig.EnvLookup = Env{}

// NewEnv returns the environment of environ (KEY=VALUE entries).
func NewEnv(environ []string) Env {
	e := Env{environ: environ, vars: make(map[string]string, len(environ))}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			e.vars[k] = v
		}
	}
	return e
}

// Environ returns the environment as KEY=VALUE entries.
func (e Env) Environ() []string { return e.environ }

// LookupEnv returns the value of k and whether it is set.
func (e Env) LookupEnv(k string) (string, bool) {
	v, ok := e.vars[k]
	return v, ok
}

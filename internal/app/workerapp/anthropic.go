package workerapp

import (
	"flag"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/anthropic"
)

// AnthropicProvider is the provider name under which --anthropic offers
// Anthropic's Messages API.
const AnthropicProvider = "anthropic"

// EnvAnthropic turns --anthropic on from the environment.
const EnvAnthropic = "SESSIONFLOW_ANTHROPIC"

// Secret is a credential. It prints, logs and marshals as "[redacted]", so
// a configuration holding one can be shown whole.
type Secret string

const redacted = "[redacted]"

// String implements fmt.Stringer.
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return redacted }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText implements encoding.TextMarshaler (and so JSON).
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// AnthropicConfig configures the Anthropic provider a worker offers.
type AnthropicConfig struct {
	// Enabled offers the provider as AnthropicProvider.
	Enabled bool
	// BaseURL is the API's base URL; empty means Anthropic's.
	BaseURL string
	// APIKey is the API key. It is read from ANTHROPIC_API_KEY only: a
	// flag would show it in the process list.
	APIKey Secret
}

// anthropicFlags are the worker's flags of the Anthropic provider.
type anthropicFlags struct {
	enabled bool
	baseURL string
}

// addAnthropicFlags defines the Anthropic provider's flags on fs.
func addAnthropicFlags(fs *flag.FlagSet) *anthropicFlags {
	f := &anthropicFlags{}
	fs.BoolVar(&f.enabled, "anthropic", false, "offer Anthropic's Messages API as model provider \"anthropic\", with the key in "+anthropic.EnvAPIKey+" (env "+EnvAnthropic+")")
	fs.StringVar(&f.baseURL, "anthropic-base-url", "", "base URL of the Anthropic provider, empty = Anthropic's (env "+anthropic.EnvBaseURL+")")
	return f
}

// config resolves the flags against env; pick gives a flag's value or,
// when the flag was not given, the variable's.
func (f *anthropicFlags) config(env temporalconn.Env, pick func(flagName, envName, flagValue string) (string, string)) (AnthropicConfig, error) {
	var cfg AnthropicConfig
	var err error
	if cfg.Enabled, err = pickBool(pick("anthropic", EnvAnthropic, strconv.FormatBool(f.enabled))); err != nil {
		return AnthropicConfig{}, err
	}
	if !cfg.Enabled {
		return AnthropicConfig{}, nil
	}
	cfg.BaseURL, _ = pick("anthropic-base-url", anthropic.EnvBaseURL, f.baseURL)
	key, _ := env.LookupEnv(anthropic.EnvAPIKey)
	cfg.APIKey = Secret(key)
	return cfg, nil
}

// addAnthropic adds the Anthropic provider to providers when cfg enables
// it.
func addAnthropic(providers provider.Set, cfg AnthropicConfig) error {
	if !cfg.Enabled {
		return nil
	}
	if _, ok := providers[AnthropicProvider]; ok {
		return fmt.Errorf("provider %q is given twice: by --anthropic and by the embedding application", AnthropicProvider)
	}
	p, err := anthropic.New(anthropic.Config{APIKey: string(cfg.APIKey), BaseURL: cfg.BaseURL})
	if err != nil {
		return fmt.Errorf("--anthropic: %w", err)
	}
	providers[AnthropicProvider] = p
	return nil
}

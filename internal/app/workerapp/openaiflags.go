package workerapp

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/openai"
)

// OpenAIProvider is the provider name under which --openai offers the
// OpenAI Chat Completions API.
const OpenAIProvider = "openai"

// Environment variables of the OpenAI-compatible provider flags.
const (
	// EnvOpenAI turns --openai on from the environment.
	EnvOpenAI = "SESSIONFLOW_OPENAI"
	// EnvOpenAICompatible gives --openai-compatible's specs, separated by
	// spaces.
	EnvOpenAICompatible = "SESSIONFLOW_OPENAI_COMPATIBLE"
)

// OpenAIConfig configures the OpenAI-compatible providers a worker offers.
type OpenAIConfig struct {
	// Enabled offers OpenAI's API (or BaseURL's) as OpenAIProvider.
	Enabled bool
	// BaseURL is its base URL (OPENAI_BASE_URL); empty means OpenAI's.
	BaseURL string
	// APIKey is its key, read from OPENAI_API_KEY only.
	APIKey Secret
	// Compatible are more endpoints, each offered under its name.
	Compatible []OpenAIEndpoint
}

// OpenAIEndpoint is one --openai-compatible endpoint.
type OpenAIEndpoint struct {
	// Name is the provider name it is offered under.
	Name string
	// BaseURL is the endpoint's API root.
	BaseURL string
	// APIKey is the value of the spec's key-env variable; empty sends none.
	APIKey Secret
	// Model, MaxTokensField and SendReasoning are as in openai.Config.
	Model, MaxTokensField string
	SendReasoning         bool
}

func (e OpenAIEndpoint) config() openai.Config {
	return openai.Config{BaseURL: e.BaseURL, APIKey: string(e.APIKey), Model: e.Model,
		MaxTokensField: e.MaxTokensField, SendReasoning: e.SendReasoning}
}

// openAIFlags are --openai and the repeatable --openai-compatible.
type openAIFlags struct {
	enabled    bool
	compatible specList
}

// specList is a repeatable string flag.
type specList []string

func (l *specList) String() string     { return strings.Join(*l, " ") }
func (l *specList) Set(v string) error { *l = append(*l, v); return nil }

// addOpenAIFlags defines the OpenAI-compatible providers' flags on fs.
func addOpenAIFlags(fs *flag.FlagSet) *openAIFlags {
	f := &openAIFlags{}
	fs.BoolVar(&f.enabled, "openai", false, "offer model provider \""+OpenAIProvider+"\": Chat Completions at "+
		openai.EnvBaseURL+" (default OpenAI's API) with the key in "+openai.EnvAPIKey+" (env "+EnvOpenAI+")")
	fs.Var(&f.compatible, "openai-compatible", "offer model provider NAME for a Chat Completions endpoint: "+
		"NAME=BASE_URL[,key-env=VAR][,model=MODEL][,max-tokens-field=FIELD][,send-reasoning]; the key is read "+
		"from the variable VAR, none is sent without it; repeatable (env "+EnvOpenAICompatible+", specs separated by spaces)")
	return f
}

// config resolves the flags against env; pick gives a flag's value or,
// when the flag was not given, the variable's. Every endpoint's
// configuration is checked here, so a bad one stops the worker at start.
func (f *openAIFlags) config(env temporalconn.Env, pick func(flagName, envName, flagValue string) (string, string)) (OpenAIConfig, error) {
	getenv := func(k string) string { v, _ := env.LookupEnv(k); return v }
	var cfg OpenAIConfig
	var err error
	if cfg.Enabled, err = pickBool(pick("openai", EnvOpenAI, strconv.FormatBool(f.enabled))); err != nil {
		return OpenAIConfig{}, err
	}
	names := map[string]bool{}
	if cfg.Enabled {
		cfg.BaseURL, cfg.APIKey = getenv(openai.EnvBaseURL), Secret(getenv(openai.EnvAPIKey))
		if cfg.APIKey == "" && cfg.BaseURL == "" {
			return OpenAIConfig{}, fmt.Errorf("--openai: %w", openai.ErrNoAPIKey)
		}
		if _, err := openai.New(openai.Config{BaseURL: cfg.BaseURL}); err != nil {
			return OpenAIConfig{}, fmt.Errorf("--openai: %s: %w", openai.EnvBaseURL, err)
		}
		names[OpenAIProvider] = true
	}
	specs, src := pick("openai-compatible", EnvOpenAICompatible, f.compatible.String())
	for _, spec := range strings.Fields(specs) {
		name, c, err := openai.ParseCompatible(spec, getenv)
		if err != nil {
			return OpenAIConfig{}, fmt.Errorf("%s: %w", src, err)
		}
		if names[name] {
			return OpenAIConfig{}, fmt.Errorf("%s: provider %q is given twice", src, name)
		}
		names[name] = true
		if _, err := openai.New(c); err != nil {
			return OpenAIConfig{}, fmt.Errorf("%s: provider %q: %w", src, name, err)
		}
		cfg.Compatible = append(cfg.Compatible, OpenAIEndpoint{Name: name, BaseURL: c.BaseURL, APIKey: Secret(c.APIKey),
			Model: c.Model, MaxTokensField: c.MaxTokensField, SendReasoning: c.SendReasoning})
	}
	return cfg, nil
}

// addOpenAI adds the providers cfg configures to providers.
func addOpenAI(providers provider.Set, cfg OpenAIConfig) error {
	add := func(flagName, name string, c openai.Config) error {
		if _, ok := providers[name]; ok {
			return fmt.Errorf("%s: provider %q is given twice: by another flag or the embedding application", flagName, name)
		}
		p, err := openai.New(c)
		if err != nil {
			return fmt.Errorf("%s: provider %q: %w", flagName, name, err)
		}
		providers[name] = p
		return nil
	}
	if cfg.Enabled {
		if err := add("--openai", OpenAIProvider, openai.Config{BaseURL: cfg.BaseURL, APIKey: string(cfg.APIKey)}); err != nil {
			return err
		}
	}
	for _, e := range cfg.Compatible {
		if err := add("--openai-compatible", e.Name, e.config()); err != nil {
			return err
		}
	}
	return nil
}

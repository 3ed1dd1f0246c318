package openai

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrInvalidSpec is wrapped by ParseCompatible's refusals.
var ErrInvalidSpec = errors.New("openai: invalid compatible-endpoint spec")

var specName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ParseCompatible parses the spec of a compatible endpoint,
// NAME=BASE_URL[,OPTION...], into the provider name and its configuration.
// Options:
//
//   - key-env=VAR: the API key is the value of the environment variable VAR
//     (read through getenv), so the key never appears on a command line;
//     without it no key is sent, and OPENAI_API_KEY is never sent to
//     another service.
//   - model=MODEL: the model of requests that name none.
//   - max-tokens-field=FIELD: Config.MaxTokensField.
//   - send-reasoning or send-reasoning=BOOL: Config.SendReasoning.
//
// For example "deepseek=https://api.deepseek.com,key-env=DEEPSEEK_API_KEY"
// or "ollama=http://localhost:11434/v1". It refuses, wrapping
// ErrInvalidSpec, a name that is not 1-64 letters, digits, '_', '.' or '-'
// (starting with a letter or digit), an empty base URL, an unknown or
// repeated option, and a key-env variable that is unset or empty. The
// configuration is checked further by New.
func ParseCompatible(spec string, getenv func(string) string) (string, Config, error) {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok {
		return "", Config{}, fmt.Errorf("%w: %q is not NAME=BASE_URL[,OPTION...]", ErrInvalidSpec, spec)
	}
	if !specName.MatchString(name) {
		return "", Config{}, fmt.Errorf("%w: provider name %q must be 1-64 letters, digits, '_', '.' or '-'", ErrInvalidSpec, name)
	}
	parts := strings.Split(rest, ",")
	cfg := Config{BaseURL: strings.TrimSpace(parts[0])}
	if cfg.BaseURL == "" {
		return "", Config{}, fmt.Errorf("%w: provider %q has no base URL", ErrInvalidSpec, name)
	}
	seen := map[string]bool{}
	for _, opt := range parts[1:] {
		key, value, hasValue := strings.Cut(strings.TrimSpace(opt), "=")
		if seen[key] {
			return "", Config{}, fmt.Errorf("%w: provider %q: option %q repeated", ErrInvalidSpec, name, key)
		}
		seen[key] = true
		switch key {
		case "key-env":
			if value == "" {
				return "", Config{}, fmt.Errorf("%w: provider %q: key-env names no variable", ErrInvalidSpec, name)
			}
			if cfg.APIKey = getenv(value); cfg.APIKey == "" {
				return "", Config{}, fmt.Errorf("%w: provider %q: the environment variable %s is not set", ErrInvalidSpec, name, value)
			}
		case "model":
			cfg.Model = value
		case "max-tokens-field":
			cfg.MaxTokensField = value
		case "send-reasoning":
			if !hasValue {
				cfg.SendReasoning = true
				continue
			}
			b, err := strconv.ParseBool(value)
			if err != nil {
				return "", Config{}, fmt.Errorf("%w: provider %q: send-reasoning=%q is not a boolean", ErrInvalidSpec, name, value)
			}
			cfg.SendReasoning = b
		default:
			return "", Config{}, fmt.Errorf("%w: provider %q: unknown option %q (key-env, model, max-tokens-field, send-reasoning)", ErrInvalidSpec, name, key)
		}
	}
	return name, cfg, nil
}

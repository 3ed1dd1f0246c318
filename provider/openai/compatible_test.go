package openai_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider/openai"
)

func TestParseCompatible(t *testing.T) {
	env := map[string]string{"DEEPSEEK_API_KEY": testKey, "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	cases := []struct {
		spec, name string
		want       openai.Config
	}{
		{"ollama=http://localhost:11434/v1", "ollama", openai.Config{BaseURL: "http://localhost:11434/v1"}},
		{"deepseek=https://api.deepseek.com,key-env=DEEPSEEK_API_KEY,model=deepseek-chat,send-reasoning", "deepseek",
			openai.Config{BaseURL: "https://api.deepseek.com", APIKey: testKey, Model: "deepseek-chat", SendReasoning: true}},
		{"vllm.local=http://gpu:8000/v1, max-tokens-field=max_completion_tokens ,send-reasoning=false", "vllm.local",
			openai.Config{BaseURL: "http://gpu:8000/v1", MaxTokensField: "max_completion_tokens"}},
	}
	for _, tc := range cases {
		name, cfg, err := openai.ParseCompatible(tc.spec, getenv)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		if name != tc.name || cfg != tc.want {
			t.Fatalf("%q: %q %+v, want %q %+v", tc.spec, name, cfg, tc.name, tc.want)
		}
	}

	refused := map[string]string{
		"http://localhost:11434":         `"http://localhost:11434" is not NAME=BASE_URL[,OPTION...]`,
		"=http://x":                      `provider name "" must be 1-64 letters, digits, '_', '.' or '-'`,
		"a b=http://x":                   `provider name "a b" must be 1-64 letters, digits, '_', '.' or '-'`,
		"x=":                             `provider "x" has no base URL`,
		"x=http://h,key-env=":            `provider "x": key-env names no variable`,
		"x=http://h,key-env=UNSET":       `provider "x": the environment variable UNSET is not set`,
		"x=http://h,key-env=EMPTY":       `provider "x": the environment variable EMPTY is not set`,
		"x=http://h,model=a,model=b":     `provider "x": option "model" repeated`,
		"x=http://h,send-reasoning=perh": `provider "x": send-reasoning="perh" is not a boolean`,
		"x=http://h,api-key=sk":          `provider "x": unknown option "api-key" (key-env, model, max-tokens-field, send-reasoning)`,
	}
	for spec, want := range refused {
		_, _, err := openai.ParseCompatible(spec, getenv)
		if !errors.Is(err, openai.ErrInvalidSpec) || err.Error() != "openai: invalid compatible-endpoint spec: "+want {
			t.Errorf("%q: %v\nwant ...: %s", spec, err, want)
		}
		if err != nil && strings.Contains(err.Error(), testKey) {
			t.Errorf("%q: the error shows the key", spec)
		}
	}
}

package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
)

const dynamicConfigFile = "dynamicconfig/sessionflow.yaml"

// checkDynamicConfigMatchesDevServer returns a problem for each of the dev
// server's default dynamic config values that the compose stack's dynamic
// config file (src) does not set to the same, unconstrained value.
func checkDynamicConfigMatchesDevServer(src []byte) []error {
	var file map[string][]struct {
		Value       any            `yaml:"value"`
		Constraints map[string]any `yaml:"constraints"`
	}
	if err := yaml.Unmarshal(src, &file); err != nil {
		return []error{fmt.Errorf("parsing %s: %w", dynamicConfigFile, err)}
	}
	var errs []error
	for _, kv := range devserver.DefaultDynamicConfig() {
		key, want, _ := strings.Cut(kv, "=")
		values, ok := file[key]
		if !ok {
			errs = append(errs, fmt.Errorf("%s does not set %s (the dev server sets %s)", dynamicConfigFile, key, want))
			continue
		}
		if len(values) != 1 || len(values[0].Constraints) != 0 {
			errs = append(errs, fmt.Errorf("%s: %s should have one unconstrained value", dynamicConfigFile, key))
			continue
		}
		got, err := json.Marshal(values[0].Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", dynamicConfigFile, key, err))
			continue
		}
		if string(got) != want {
			errs = append(errs, fmt.Errorf("%s: %s is %s, the dev server's is %s", dynamicConfigFile, key, got, want))
		}
	}
	return errs
}

func TestDynamicConfigMatchesDevServer(t *testing.T) {
	src, err := os.ReadFile(filepath.FromSlash(dynamicConfigFile))
	require.NoError(t, err)
	assert.Empty(t, checkDynamicConfigMatchesDevServer(src))
}

func TestDynamicConfigCheckDetectsDrift(t *testing.T) {
	src, err := os.ReadFile(filepath.FromSlash(dynamicConfigFile))
	require.NoError(t, err)
	text := string(src)
	require.Contains(t, text, "matching.numTaskqueueReadPartitions:\n  - value: 1\n")
	cases := map[string]string{
		"value differs": strings.Replace(text, "matching.numTaskqueueReadPartitions:\n  - value: 1\n",
			"matching.numTaskqueueReadPartitions:\n  - value: 4\n", 1),
		"key missing": strings.Replace(text, "matching.numTaskqueueReadPartitions:",
			"matching.numTaskqueueReadPartitionz:", 1),
		"constrained": strings.Replace(text, "matching.numTaskqueueReadPartitions:\n  - value: 1\n    constraints: {}",
			"matching.numTaskqueueReadPartitions:\n  - value: 1\n    constraints:\n      namespace: other", 1),
		"not yaml": text + "\n\t- : [\n",
	}
	for name, mutated := range cases {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, text, mutated)
			assert.NotEmpty(t, checkDynamicConfigMatchesDevServer([]byte(mutated)))
		})
	}
}

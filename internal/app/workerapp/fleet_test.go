package workerapp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseArgsStoreDescriptorsAndCacheDefaults(t *testing.T) {
	cfg, err := ParseArgs(nil, isolated(t))
	require.NoError(t, err)
	assert.Equal(t, 1024, cfg.MaxStoreDescriptors)
	assert.Zero(t, cfg.WorkflowCacheSize, "the SDK's default")
}

func TestParseArgsStoreDescriptorsAndCache(t *testing.T) {
	env := isolated(t, "SESSIONFLOW_MAX_STORE_DESCRIPTORS=64", "SESSIONFLOW_WORKFLOW_CACHE_SIZE=500")
	cfg, err := ParseArgs(nil, env)
	require.NoError(t, err)
	assert.Equal(t, 64, cfg.MaxStoreDescriptors)
	assert.Equal(t, 500, cfg.WorkflowCacheSize)

	cfg, err = ParseArgs([]string{"--max-store-descriptors", "0", "--workflow-cache-size", "20000"}, env)
	require.NoError(t, err)
	assert.Zero(t, cfg.MaxStoreDescriptors, "a flag wins over the environment; 0 is no limit")
	assert.Equal(t, 20000, cfg.WorkflowCacheSize)
}

func TestParseArgsStoreDescriptorsAndCacheRejectBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-store-descriptors", "-1"}, "--max-store-descriptors: -1 is negative"},
		{[]string{"--workflow-cache-size", "-5"}, "--workflow-cache-size: -5 is negative"},
	} {
		_, err := ParseArgs(tc.args, isolated(t))
		require.EqualError(t, err, tc.want, "%v", tc.args)
	}
	_, err := ParseArgs(nil, isolated(t, "SESSIONFLOW_MAX_STORE_DESCRIPTORS=many"))
	require.EqualError(t, err, `SESSIONFLOW_MAX_STORE_DESCRIPTORS: "many" is not an integer`)
}

func TestValidateStoreDescriptorsAndCache(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxStoreDescriptors = -2
	require.EqualError(t, cfg.Validate(), "the store descriptor limit -2 is negative")
	cfg = DefaultConfig()
	cfg.WorkflowCacheSize = -3
	require.EqualError(t, cfg.Validate(), "the workflow cache size -3 is negative")
}

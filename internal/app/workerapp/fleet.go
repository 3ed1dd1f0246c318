package workerapp

import (
	"flag"
	"strconv"

	"go.temporal.io/sdk/worker"
)

// DefaultMaxStoreDescriptors is the default bound on the descriptors the
// worker's session store keeps open between mutations: two per write handle
// (its lease and its log), so the 512 most recently used live sessions keep
// theirs and the others reopen them on their next mutation
// (docs/DECISIONS.md D52).
const DefaultMaxStoreDescriptors = 1024

// Environment variables of the many-sessions settings.
const (
	EnvMaxStoreDescriptors = "SESSIONFLOW_MAX_STORE_DESCRIPTORS"
	EnvWorkflowCacheSize   = "SESSIONFLOW_WORKFLOW_CACHE_SIZE"
)

// fleetFlags are the flags that size a worker holding many live sessions.
type fleetFlags struct {
	maxStoreDescriptors int
	workflowCacheSize   int
}

func addFleetFlags(fs *flag.FlagSet) *fleetFlags {
	f := &fleetFlags{}
	fs.IntVar(&f.maxStoreDescriptors, "max-store-descriptors", DefaultMaxStoreDescriptors, "descriptors the session store keeps open between appends (two per live session); past it the least recently used sessions close theirs and reopen them, lease checked, on their next append; 0 = no limit (env "+EnvMaxStoreDescriptors+")")
	fs.IntVar(&f.workflowCacheSize, "workflow-cache-size", 0, "sessions (workflow executions) the worker keeps cached; an evicted session replays its history on its next task; 0 = SDK default 10000 (env "+EnvWorkflowCacheSize+")")
	return f
}

// config fills cfg's many-sessions settings.
func (f *fleetFlags) config(cfg *Config, pick func(flagName, envName, flagValue string) (string, string)) error {
	var err error
	if cfg.MaxStoreDescriptors, err = pickCount(pick("max-store-descriptors", EnvMaxStoreDescriptors, strconv.Itoa(f.maxStoreDescriptors))); err != nil {
		return err
	}
	cfg.WorkflowCacheSize, err = pickCount(pick("workflow-cache-size", EnvWorkflowCacheSize, strconv.Itoa(f.workflowCacheSize)))
	return err
}

// setWorkflowCacheSize sizes the SDK's workflow cache. The cache belongs to
// the process, not to one worker, and takes its size when the first worker
// of the process starts; 0 leaves the SDK's default.
func setWorkflowCacheSize(n int) {
	if n > 0 {
		worker.SetStickyWorkflowCacheSize(n)
	}
}

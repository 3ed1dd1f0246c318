package main

import (
	"strings"

	"github.com/sessionflow/sessionflow/client"
)

// envShards lists the shards as name=task-queue pairs separated by commas,
// when no --shard flag is given.
const envShards = "SESSIONFLOW_SHARDS"

const shardsNote = `

Shards: --shard NAME=TASK-QUEUE, repeated (env ` + envShards + `, the pairs separated
by commas), spreads sessions over several store roots, each served by the
workers of its own task queue: a session (or loop) starts on the shard a
stable hash of its id picks, or on the one --on-shard names (docs/API.md,
Shards; docs/SCALING.md). --shard excludes --task-queue.`

// addShardFlags registers --shard on the connection flags.
func (cf *connFlags) addShardFlags() {
	cf.fs.StringArrayVar(&cf.shards, "shard", nil, "a shard as NAME=TASK-QUEUE, repeated (env "+envShards+")")
}

// addOnShard registers --on-shard, the explicit shard of a start.
func (cf *connFlags) addOnShard() {
	cf.fs.StringVar(&cf.onShard, "on-shard", "", "start on this shard instead of the one the session id hashes to (needs --shard)")
}

// router builds the shard router from --shard, else the environment; nil
// when no shard is configured.
func (cf *connFlags) router(getenv func(string) string) (*client.Router, error) {
	specs := cf.shards
	if len(specs) == 0 {
		if v := getenv(envShards); v != "" {
			specs = strings.Split(v, ",")
		}
	}
	if len(specs) == 0 {
		if cf.onShard != "" {
			return nil, usageErrorf("--on-shard %q needs shards: pass --shard NAME=TASK-QUEUE or set %s", cf.onShard, envShards)
		}
		return nil, nil
	}
	if cf.fs.Changed("task-queue") {
		return nil, usageErrorf("--task-queue and --shard exclude each other: each shard names its task queue")
	}
	shards := make([]client.Shard, 0, len(specs))
	for _, s := range specs {
		sh, err := client.ParseShard(strings.TrimSpace(s))
		if err != nil {
			return nil, &usageError{err: err}
		}
		shards = append(shards, sh)
	}
	r, err := client.NewRouter(shards...)
	if err != nil {
		return nil, &usageError{err: err}
	}
	if cf.onShard != "" {
		if _, ok := r.Lookup(cf.onShard); !ok {
			return nil, usageErrorf("--on-shard %q is none of the shards given by --shard", cf.onShard)
		}
	}
	return r, nil
}

// callOptions are the client call options of --on-shard.
func (cf *connFlags) callOptions() []client.CallOption {
	if cf.onShard == "" {
		return nil
	}
	return []client.CallOption{client.OnShard(cf.onShard)}
}

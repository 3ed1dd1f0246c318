package main

import (
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/client"
)

// shardFlags parses args as the flags of a start command.
func shardFlags(t *testing.T, args ...string) *connFlags {
	t.Helper()
	cmd := &cobra.Command{Use: "x"}
	cf := addConnFlags(cmd)
	cf.addOnShard()
	require.NoError(t, cmd.ParseFlags(args))
	return cf
}

func noEnv(string) string { return "" }

func TestShardFlagsBuildTheRouter(t *testing.T) {
	cf := shardFlags(t, "--shard", "b=qb", "--shard", "a=qa")
	r, err := cf.router(noEnv)
	require.NoError(t, err)
	require.Equal(t, []client.Shard{{Name: "a", TaskQueue: "qa"}, {Name: "b", TaskQueue: "qb"}}, r.Shards())
	require.Equal(t, "b", r.Route("sess-1").Name)
	require.Nil(t, cf.callOptions())

	env := func(k string) string {
		if k == "SESSIONFLOW_SHARDS" {
			return "a=qa, b=qb"
		}
		return ""
	}
	cf = shardFlags(t, "--on-shard", "a")
	r, err = cf.router(env)
	require.NoError(t, err)
	require.Len(t, r.Shards(), 2)
	require.Len(t, cf.callOptions(), 1)
	c := client.New(nil, client.Options{Router: r})
	s, err := c.ShardOf("sess-1", cf.callOptions()...)
	require.NoError(t, err)
	require.Equal(t, client.Shard{Name: "a", TaskQueue: "qa"}, s)

	// Flags win over the environment.
	cf = shardFlags(t, "--shard", "z=qz")
	r, err = cf.router(env)
	require.NoError(t, err)
	require.Equal(t, []client.Shard{{Name: "z", TaskQueue: "qz"}}, r.Shards())

	// No shard: no router, the task queue serves.
	r, err = shardFlags(t).router(noEnv)
	require.NoError(t, err)
	require.Nil(t, r)
}

func TestShardFlagsRefuseBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--shard", "a"}, `invalid shard configuration: shard "a" is not name=task-queue`},
		{[]string{"--shard", "a=q", "--shard", "a=r"}, `invalid shard configuration: shard "a" is given twice`},
		{[]string{"--shard", "a=q", "--task-queue", "t"}, `--task-queue and --shard exclude each other: each shard names its task queue`},
		{[]string{"--shard", "a=q", "--on-shard", "b"}, `--on-shard "b" is none of the shards given by --shard`},
		{[]string{"--on-shard", "b"}, `--on-shard "b" needs shards: pass --shard NAME=TASK-QUEUE or set SESSIONFLOW_SHARDS`},
	} {
		_, err := shardFlags(t, tc.args...).router(noEnv)
		var ue *usageError
		require.ErrorAs(t, err, &ue, "%v", tc.args)
		require.EqualError(t, err, tc.msg, "%v", tc.args)
	}
}

// A bad shard list is a usage error before any connection.
func TestShardFlagsUsageErrorOnTheCommandLine(t *testing.T) {
	r := runCLI(t, "", "create", "--id", "s1", "--shard", "a=q", "--shard", "b=q", "--address", "127.0.0.1:1")
	require.Equal(t, 1, r.code)
	require.Equal(t, "starter: invalid shard configuration: shards \"a\" and \"b\" share task queue \"q\"\nRun 'starter create --help' for usage.\n", r.stderr)
}

func TestShardRouteCommand(t *testing.T) {
	r := mustOK(t, runCLI(t, "", "route", "--shard", "a=qa", "--shard", "b=qb", "sess-1", "sess-3", "alpha"))
	require.Equal(t, "ID      SHARD  TASK QUEUE\nsess-1  b      qb\nsess-3  a      qa\nalpha   a      qa\n", r.stdout)

	t.Setenv("SESSIONFLOW_SHARDS", "a=qa,b=qb,c=qc")
	r = mustOK(t, runCLI(t, "", "route", "--json", "sess-2"))
	require.JSONEq(t, `[{"id":"sess-2","shard":"c","taskQueue":"qc"}]`, r.stdout)

	t.Setenv("SESSIONFLOW_SHARDS", "")
	mustFail(t, runCLI(t, "", "route", "sess-1"), 1, "no shards: pass --shard NAME=TASK-QUEUE or set SESSIONFLOW_SHARDS")
	mustFail(t, runCLI(t, "", "route", "--shard", "a=qa"), 1, `"starter route" needs at least one session id`)
}

package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// routeEntry is one line of `starter route --json`.
type routeEntry struct {
	ID        string `json:"id"`
	Shard     string `json:"shard"`
	TaskQueue string `json:"taskQueue"`
}

func newRouteCmd(a *app) *cobra.Command {
	var asJSON bool
	cf := &connFlags{}
	cmd := &cobra.Command{
		Use:   "route --shard NAME=TASK-QUEUE... ID...",
		Short: "Print the shard each session id is routed to",
		Long: `Print, for each session id, the shard the client's router sends it to under the
shards given by --shard NAME=TASK-QUEUE, repeated (env ` + envShards + `): the
same computation as the lifecycle commands, without connecting to Temporal.
Comparing the routes of a root's ids (log list) under the old and the new shard
lists shows which sessions move when a shard is added (docs/SCALING.md).
--json prints one JSON array of {"id", "shard", "taskQueue"}.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("%q needs at least one session id", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(_ *cobra.Command, ids []string) error {
			r, err := cf.router(a.getenv)
			if err != nil {
				return err
			}
			if r == nil {
				return usageErrorf("no shards: pass --shard NAME=TASK-QUEUE or set %s", envShards)
			}
			out := make([]routeEntry, len(ids))
			for i, id := range ids {
				s := r.Route(id)
				out[i] = routeEntry{ID: id, Shard: s.Name, TaskQueue: s.TaskQueue}
			}
			if asJSON {
				return writeJSON(a.stdout, out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSHARD\tTASK QUEUE")
			for _, e := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", e.ID, e.Shard, e.TaskQueue)
			}
			return tw.Flush()
		},
	}
	cf.fs = cmd.Flags()
	cf.addShardFlags()
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the routes as JSON")
	return cmd
}

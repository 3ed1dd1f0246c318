package readiness

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// TaskQueuePolled returns a probe that succeeds once a worker polls both the
// workflow and the activity tasks of taskQueue; with identity set, only a
// poller of that identity counts.
func TaskQueuePolled(c client.Client, taskQueue, identity string) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			resp, err := c.DescribeTaskQueue(ctx, taskQueue, typ)
			if err != nil {
				return fmt.Errorf("describing task queue %s: %w", taskQueue, err)
			}
			found := false
			for _, p := range resp.GetPollers() {
				if identity == "" || p.GetIdentity() == identity {
					found = true
				}
			}
			if !found {
				who := "no worker"
				if identity != "" {
					who = "worker " + identity + " does not"
				}
				return fmt.Errorf("%s polls the %s tasks of %s yet", who, typ, taskQueue)
			}
		}
		return nil
	}
}

package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.yaml.in/yaml/v3"

	"github.com/sessionflow/sessionflow/deploy"
)

// inFlightLimitRE reads the limit out of the server's refusal of an update
// beyond history.maxInFlightUpdates ("limit on number of concurrent
// in-flight updates has been reached (10)").
var inFlightLimitRE = regexp.MustCompile(`in-flight updates has been reached \((\d+)\)`)

// admitWait is how long AdmittedUpdates waits for the server to refuse one
// of its updates.
const admitWait = 3 * time.Second

// AdmittedUpdates asks the Temporal server behind tc how many updates it
// admits in flight on one workflow of namespace (its dynamic config
// history.maxInFlightUpdates, whose default is 10): it starts a workflow on
// a task queue nobody polls, sends it n updates at once (none can be
// accepted, so all stay in flight), and returns n when the server admits
// them all, or the limit its refusal of the others names (at once: the
// server refuses an update beyond its limit as it arrives). The workflow is
// terminated before it returns. It takes about three seconds when all n
// are admitted.
func AdmittedUpdates(ctx context.Context, tc client.Client, namespace string, n int) (int, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	wid := "sessionflow-probe-inflight-updates-" + hex.EncodeToString(b)
	if _, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: wid, TaskQueue: wid, WorkflowExecutionTimeout: time.Minute,
	}, "InFlightUpdatesProbe"); err != nil {
		return 0, fmt.Errorf("starting the probe workflow: %w", err)
	}
	defer func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = tc.TerminateWorkflow(tctx, wid, "", "probe done")
		cancel()
	}()
	pctx, cancel := context.WithTimeout(ctx, admitWait)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := tc.WorkflowService().UpdateWorkflowExecution(pctx, &workflowservice.UpdateWorkflowExecutionRequest{
				Namespace:         namespace,
				WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid},
				WaitPolicy:        &updatepb.WaitPolicy{LifecycleStage: enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED},
				Request: &updatepb.Request{
					Meta:  &updatepb.Meta{UpdateId: strconv.Itoa(i)},
					Input: &updatepb.Input{Name: "probe"},
				},
			})
			errs <- err
		}()
	}
	for range n {
		err := <-errs
		var re *serviceerror.ResourceExhausted
		if !errors.As(err, &re) || re.Cause != enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT {
			// Admitted (answered at the deadline, still waiting to be
			// accepted), or failed some other way.
			if err != nil && ctx.Err() != nil {
				return 0, ctx.Err()
			}
			continue
		}
		m := inFlightLimitRE.FindStringSubmatch(re.Message)
		if m == nil {
			return 0, fmt.Errorf("the server refused an update in flight without naming its limit: %w", err)
		}
		return strconv.Atoi(m[1])
	}
	return n, nil
}

// inFlightUpdatesKey is the dynamic config key of the updates a workflow
// admits in flight.
const inFlightUpdatesKey = "history.maxInFlightUpdates"

// configuredInFlightUpdates returns the value deploy's dynamic config file
// (src) sets for history.maxInFlightUpdates.
func configuredInFlightUpdates(src []byte) (int, error) {
	var file map[string][]struct {
		Value any `yaml:"value"`
	}
	if err := yaml.Unmarshal(src, &file); err != nil {
		return 0, fmt.Errorf("parsing %s: %w", deploy.DynamicConfigFile, err)
	}
	values := file[inFlightUpdatesKey]
	if len(values) != 1 {
		return 0, fmt.Errorf("%s sets %s %d times, want once", deploy.DynamicConfigFile, inFlightUpdatesKey, len(values))
	}
	v, ok := values[0].Value.(int)
	if !ok {
		return 0, fmt.Errorf("%s: %s is %v, not a number", deploy.DynamicConfigFile, inFlightUpdatesKey, values[0].Value)
	}
	return v, nil
}

// checkInFlightUpdates checks that the running server applies deploy's
// dynamic config: it admits as many updates in flight on one workflow as
// the file sets, not the server's default. Callers appending at the end
// of a session (client.AppendAtEnd) beyond the server's limit are refused
// and wait out the SDK's backoff.
func (c *Cluster) checkInFlightUpdates(ctx context.Context) error {
	src, err := deploy.Files.ReadFile(deploy.DynamicConfigFile)
	if err != nil {
		return err
	}
	want, err := configuredInFlightUpdates(src)
	if err != nil {
		return err
	}
	got, err := AdmittedUpdates(ctx, c.client, Namespace, want+1)
	if err != nil {
		return fmt.Errorf("asking the server for its limit of updates in flight: %w", err)
	}
	if got != want {
		return fmt.Errorf("the server admits %d updates in flight on one workflow, %s sets %s to %d: the server does not apply its dynamic config",
			got, deploy.DynamicConfigFile, inFlightUpdatesKey, want)
	}
	c.progressf("the server applies its dynamic config: %d updates in flight on one workflow (%s)", got, inFlightUpdatesKey)
	return nil
}

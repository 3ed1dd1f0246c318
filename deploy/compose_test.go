package deploy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/workflows"
)

const (
	composeFile = "docker-compose.yml"

	svcPostgres   = "postgresql"
	svcSchema     = "temporal-admin-tools"
	svcServer     = "temporal"
	svcNamespace  = "temporal-create-namespace"
	svcUI         = "temporal-ui"
	svcWorker     = "sessionflow-worker"
	storeVolume   = "sessionflow-store"
	storeRoot     = "/var/lib/sessionflow"
	modulePath    = "github.com/sessionflow/sessionflow"
	serverVersion = "1.29.1"
	uiVersion     = "2.42.1"
)

// loadProject parses docker-compose.yml the way `docker compose -f deploy/docker-compose.yml`
// does, with relative paths resolved against this directory. Interpolation sees a fixed, empty
// environment, so the result does not depend on the caller's shell.
func loadProject(t *testing.T) *types.Project {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	opts, err := cli.NewProjectOptions(
		[]string{filepath.Join(wd, composeFile)},
		cli.WithWorkingDirectory(wd),
		cli.WithEnv(nil),
		cli.WithResolvedPaths(true),
	)
	require.NoError(t, err)
	p, err := opts.LoadProject(context.Background())
	require.NoError(t, err, "the compose file must load")
	return p
}

// A check inspects a loaded project and returns every problem it finds.
type check func(p *types.Project) []error

func problems(format string, args ...any) []error {
	return []error{fmt.Errorf(format, args...)}
}

func service(p *types.Project, name string) (types.ServiceConfig, error) {
	s, ok := p.Services[name]
	if !ok {
		return types.ServiceConfig{}, fmt.Errorf("service %q is missing", name)
	}
	return s, nil
}

func env(s types.ServiceConfig) map[string]string {
	m := make(map[string]string, len(s.Environment))
	for k, v := range s.Environment {
		if v == nil {
			m[k] = ""
		} else {
			m[k] = *v
		}
	}
	return m
}

func checkServiceSet(p *types.Project) []error {
	want := []string{svcPostgres, svcSchema, svcServer, svcNamespace, svcUI, svcWorker}
	got := p.ServiceNames()
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return problems("services are %v, want %v", got, want)
	}
	return nil
}

var pinnedTag = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*(-[A-Za-z0-9.-]+)?$`)

func checkImagesPinned(p *types.Project) []error {
	var errs []error
	want := map[string]string{
		svcSchema:    "temporalio/admin-tools:" + serverVersion + "-",
		svcNamespace: "temporalio/admin-tools:" + serverVersion + "-",
		svcServer:    "temporalio/server:" + serverVersion,
		svcUI:        "temporalio/ui:" + uiVersion,
		svcPostgres:  "postgres:",
	}
	for name, s := range p.Services {
		if s.Build != nil {
			continue
		}
		repo, tag, ok := strings.Cut(s.Image, ":")
		if s.Image == "" || !ok || strings.Contains(tag, "/") {
			errs = append(errs, fmt.Errorf("%s: image %q has no tag", name, s.Image))
			continue
		}
		if tag == "latest" || !pinnedTag.MatchString(tag) {
			errs = append(errs, fmt.Errorf("%s: image %s is not pinned to a version (tag %q)", name, repo, tag))
		}
		prefix, known := want[name]
		switch {
		case !known:
			errs = append(errs, fmt.Errorf("%s: no expected image for this service", name))
		case strings.HasSuffix(prefix, ":") || strings.HasSuffix(prefix, "-"):
			if !strings.HasPrefix(s.Image, prefix) {
				errs = append(errs, fmt.Errorf("%s: image %q, want %s…", name, s.Image, prefix))
			}
		case s.Image != prefix:
			errs = append(errs, fmt.Errorf("%s: image %q, want %q", name, s.Image, prefix))
		}
	}
	return errs
}

func checkPublishedPorts(p *types.Project) []error {
	want := map[string]uint32{svcServer: 7233, svcUI: 8080, svcWorker: 9090}
	var errs []error
	for name, s := range p.Services {
		var published []string
		for _, port := range s.Ports {
			published = append(published, fmt.Sprintf("%s:%d/%s", port.Published, port.Target, port.Protocol))
		}
		target, wanted := want[name]
		if !wanted {
			if len(published) > 0 {
				errs = append(errs, fmt.Errorf("%s publishes %v, want no published ports", name, published))
			}
			continue
		}
		exp := fmt.Sprintf("%d:%d/tcp", target, target)
		if !slices.Equal(published, []string{exp}) {
			errs = append(errs, fmt.Errorf("%s publishes %v, want [%s]", name, published, exp))
		}
	}
	return errs
}

func checkStoreVolume(p *types.Project) []error {
	var errs []error
	if _, ok := p.Volumes[storeVolume]; !ok {
		errs = append(errs, fmt.Errorf("top-level volume %q is not declared", storeVolume))
	}
	w, err := service(p, svcWorker)
	if err != nil {
		return append(errs, err)
	}
	var mounts []types.ServiceVolumeConfig
	for _, v := range w.Volumes {
		if v.Target == storeRoot {
			mounts = append(mounts, v)
		}
	}
	switch {
	case len(mounts) != 1:
		errs = append(errs, fmt.Errorf("worker has %d mounts at %s, want 1", len(mounts), storeRoot))
	case mounts[0].Type != types.VolumeTypeVolume || mounts[0].Source != storeVolume:
		errs = append(errs, fmt.Errorf("worker mounts %s %q at %s, want named volume %q",
			mounts[0].Type, mounts[0].Source, storeRoot, storeVolume))
	case mounts[0].ReadOnly:
		errs = append(errs, fmt.Errorf("worker mounts the store read-only"))
	}
	for name, s := range p.Services {
		if name == svcWorker {
			continue
		}
		for _, v := range s.Volumes {
			if v.Source == storeVolume {
				errs = append(errs, fmt.Errorf("%s also mounts %q; only the worker owns the store", name, storeVolume))
			}
		}
	}
	return errs
}

func checkStartOrder(p *types.Project) []error {
	healthy, completed := types.ServiceConditionHealthy, types.ServiceConditionCompletedSuccessfully
	want := map[string]map[string]string{
		svcPostgres:  {},
		svcSchema:    {svcPostgres: healthy},
		svcServer:    {svcSchema: completed},
		svcNamespace: {svcServer: healthy},
		svcUI:        {svcServer: healthy},
		svcWorker:    {svcServer: healthy, svcNamespace: completed},
	}
	var errs []error
	for name, deps := range want {
		s, err := service(p, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got := map[string]string{}
		for dep, d := range s.DependsOn {
			got[dep] = d.Condition
			if !d.Required {
				errs = append(errs, fmt.Errorf("%s: dependency on %s is not required", name, dep))
			}
		}
		if !mapsEqual(got, deps) {
			errs = append(errs, fmt.Errorf("%s depends on %v, want %v", name, got, deps))
		}
	}
	for name, s := range p.Services {
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				continue
			}
			switch d.Condition {
			case healthy:
				if target.HealthCheck == nil || target.HealthCheck.Disable || len(target.HealthCheck.Test) == 0 {
					errs = append(errs, fmt.Errorf("%s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep))
				}
			case completed:
				if target.Restart != types.RestartPolicyNo {
					errs = append(errs, fmt.Errorf("%s waits for %s to complete, but %s has restart %q", name, dep, dep, target.Restart))
				}
			}
		}
	}
	return errs
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func checkHealthchecks(p *types.Project) []error {
	var errs []error
	want := map[string]*regexp.Regexp{
		svcPostgres: regexp.MustCompile(`^CMD(-SHELL)? pg_isready( |$)`),
		svcServer:   regexp.MustCompile(`^CMD temporal operator cluster health --address localhost:7233$`),
	}
	for name, re := range want {
		s, err := service(p, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		hc := s.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) == 0 {
			errs = append(errs, fmt.Errorf("%s has no healthcheck", name))
			continue
		}
		if test := strings.Join(hc.Test, " "); !re.MatchString(test) {
			errs = append(errs, fmt.Errorf("%s healthcheck is %q, want a match of %s", name, test, re))
		}
		if hc.Interval == nil || hc.Retries == nil || *hc.Retries == 0 {
			errs = append(errs, fmt.Errorf("%s healthcheck needs an interval and retries", name))
		}
	}
	return errs
}

func checkWorkerEnvironment(p *types.Project) []error {
	w, err := service(p, svcWorker)
	if err != nil {
		return []error{err}
	}
	want := map[string]string{
		"TEMPORAL_ADDRESS":        "temporal:7233",
		"TEMPORAL_NAMESPACE":      "default",
		"SESSIONFLOW_TASK_QUEUE":  "sessionflow",
		"SESSIONFLOW_ROOT":        storeRoot,
		"SESSIONFLOW_COMPRESSION": "zstd",
	}
	if got := env(w); !mapsEqual(got, want) {
		return problems("worker environment is %v, want %v", got, want)
	}
	return nil
}

// checkAddresses verifies that every host:port a service is told to dial names a service of
// the stack and a port that service listens on.
func checkAddresses(p *types.Project) []error {
	listens := map[string]string{svcServer: "7233", svcPostgres: "5432"}
	dials := []struct{ svc, key string }{
		{svcWorker, "TEMPORAL_ADDRESS"},
		{svcUI, "TEMPORAL_ADDRESS"},
		{svcNamespace, "TEMPORAL_ADDRESS"},
	}
	var errs []error
	for _, d := range dials {
		s, err := service(p, d.svc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		addr := env(s)[d.key]
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s=%q: %w", d.svc, d.key, addr, err))
			continue
		}
		if _, ok := p.Services[host]; !ok || listens[host] != port {
			errs = append(errs, fmt.Errorf("%s %s=%q does not name a listening service of the stack", d.svc, d.key, addr))
		}
	}
	pg, err := service(p, svcPostgres)
	if err != nil {
		return append(errs, err)
	}
	pgEnv := env(pg)
	if pgEnv["POSTGRES_USER"] == "" || pgEnv["POSTGRES_PASSWORD"] == "" {
		errs = append(errs, fmt.Errorf("%s needs POSTGRES_USER and POSTGRES_PASSWORD", svcPostgres))
	}
	db := []struct {
		svc                      string
		host, port, user, passwd string
		fixed                    map[string]string
	}{
		{svcSchema, "SQL_HOST", "SQL_PORT", "SQL_USER", "SQL_PASSWORD", map[string]string{"SQL_PLUGIN": "postgres12"}},
		{svcServer, "POSTGRES_SEEDS", "DB_PORT", "POSTGRES_USER", "POSTGRES_PWD", map[string]string{"DB": "postgres12"}},
	}
	for _, d := range db {
		s, err := service(p, d.svc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e := env(s)
		if e[d.host] != svcPostgres || e[d.port] != listens[svcPostgres] {
			errs = append(errs, fmt.Errorf("%s dials %s:%s, want %s:%s", d.svc, e[d.host], e[d.port], svcPostgres, listens[svcPostgres]))
		}
		if e[d.user] != pgEnv["POSTGRES_USER"] || e[d.passwd] != pgEnv["POSTGRES_PASSWORD"] {
			errs = append(errs, fmt.Errorf("%s credentials %s/%s differ from the database's", d.svc, d.user, d.passwd))
		}
		for k, v := range d.fixed {
			if e[k] != v {
				errs = append(errs, fmt.Errorf("%s %s=%q, want %q", d.svc, k, e[k], v))
			}
		}
	}
	return errs
}

// hostPath maps a path inside a service's container to the host file a bind mount puts there.
func hostPath(s types.ServiceConfig, containerPath string) (string, bool) {
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		rel, err := filepath.Rel(v.Target, containerPath)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return filepath.Join(v.Source, rel), true
	}
	return "", false
}

func regularFile(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	return nil
}

func checkOneShotJobs(p *types.Project) []error {
	var errs []error
	for _, name := range []string{svcSchema, svcNamespace} {
		s, err := service(p, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s.Restart != types.RestartPolicyNo {
			errs = append(errs, fmt.Errorf("%s: restart %q, want %q", name, s.Restart, types.RestartPolicyNo))
		}
		cmd := append(slices.Clone([]string(s.Entrypoint)), s.Command...)
		var script string
		for _, arg := range cmd {
			if strings.HasSuffix(arg, ".sh") {
				script = arg
			}
		}
		if script == "" {
			errs = append(errs, fmt.Errorf("%s runs %q, want a mounted setup script", name, cmd))
			continue
		}
		src, ok := hostPath(s, script)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s is not under a bind mount", name, script))
			continue
		}
		if err := regularFile(src); err != nil {
			errs = append(errs, fmt.Errorf("%s: script %s: %w", name, script, err))
		}
	}
	return errs
}

func checkServerDynamicConfig(p *types.Project) []error {
	s, err := service(p, svcServer)
	if err != nil {
		return []error{err}
	}
	file := env(s)["DYNAMIC_CONFIG_FILE_PATH"]
	if file == "" {
		return problems("%s has no DYNAMIC_CONFIG_FILE_PATH", svcServer)
	}
	if !path.IsAbs(file) {
		file = path.Join("/etc/temporal", file) // the server image's working directory
	}
	src, ok := hostPath(s, file)
	if !ok {
		return problems("%s: dynamic config %s is not under a bind mount", svcServer, file)
	}
	if err := regularFile(src); err != nil {
		return problems("%s: dynamic config: %v", svcServer, err)
	}
	return nil
}

func checkWorkerLifecycle(p *types.Project) []error {
	w, err := service(p, svcWorker)
	if err != nil {
		return []error{err}
	}
	var errs []error
	if w.Restart != types.RestartPolicyUnlessStopped {
		errs = append(errs, fmt.Errorf("worker restart %q, want %q", w.Restart, types.RestartPolicyUnlessStopped))
	}
	if w.StopGracePeriod == nil || time.Duration(*w.StopGracePeriod) < 30*time.Second {
		errs = append(errs, fmt.Errorf("worker stop_grace_period %v, want at least 30s", w.StopGracePeriod))
	}
	if w.StopSignal != "" && w.StopSignal != "SIGTERM" && w.StopSignal != "SIGINT" {
		errs = append(errs, fmt.Errorf("worker stop_signal %q does not start a graceful shutdown", w.StopSignal))
	}
	return errs
}

func checkWorkerBuild(p *types.Project) []error {
	w, err := service(p, svcWorker)
	if err != nil {
		return []error{err}
	}
	if w.Build == nil {
		return problems("worker has no build section")
	}
	var errs []error
	gomod, err := os.ReadFile(filepath.Join(w.Build.Context, "go.mod"))
	if err != nil {
		errs = append(errs, fmt.Errorf("worker build context %s: %w", w.Build.Context, err))
	} else if !strings.HasPrefix(string(gomod), "module "+modulePath+"\n") {
		errs = append(errs, fmt.Errorf("worker build context %s is not the root of %s", w.Build.Context, modulePath))
	}
	dockerfile := w.Build.Dockerfile
	if !filepath.IsAbs(dockerfile) {
		dockerfile = filepath.Join(w.Build.Context, dockerfile)
	}
	here, err := filepath.Abs("Dockerfile")
	if err != nil {
		return append(errs, err)
	}
	if err := regularFile(dockerfile); err != nil {
		errs = append(errs, fmt.Errorf("worker dockerfile: %w", err))
	} else if dockerfile != here {
		errs = append(errs, fmt.Errorf("worker dockerfile resolves to %s, want %s", dockerfile, here))
	}
	return errs
}

// namedCheck is a check with the name its subtest runs under.
type namedCheck struct {
	name string
	fn   check
}

// runChecks runs each check on p as a subtest and reports its errors.
func runChecks(t *testing.T, p *types.Project, checks []namedCheck) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			for _, err := range c.fn(p) {
				t.Error(err)
			}
		})
	}
}

// editService returns an edit of the project's service name by f.
func editService(name string, f func(*types.ServiceConfig)) func(*types.Project) {
	return func(p *types.Project) {
		s := p.Services[name]
		f(&s)
		p.Services[name] = s
	}
}

var composeChecks = []namedCheck{
	{"ServiceSet", checkServiceSet},
	{"ImagesPinned", checkImagesPinned},
	{"PublishedPorts", checkPublishedPorts},
	{"StoreVolume", checkStoreVolume},
	{"StartOrder", checkStartOrder},
	{"Healthchecks", checkHealthchecks},
	{"WorkerEnvironment", checkWorkerEnvironment},
	{"Addresses", checkAddresses},
	{"OneShotJobs", checkOneShotJobs},
	{"ServerDynamicConfig", checkServerDynamicConfig},
	{"WorkerLifecycle", checkWorkerLifecycle},
	{"WorkerBuild", checkWorkerBuild},
	{"SearchAttributes", checkSearchAttributes},
}

// checkSearchAttributes: the namespace job registers exactly the search
// attributes the session workflows keep, as Keyword.
func checkSearchAttributes(p *types.Project) []error {
	svc, ok := p.Services[svcNamespace]
	if !ok {
		return []error{fmt.Errorf("service %s missing", svcNamespace)}
	}
	v := svc.Environment["SEARCH_ATTRIBUTES"]
	if v == nil {
		return []error{fmt.Errorf("%s: SEARCH_ATTRIBUTES is not set", svcNamespace)}
	}
	got := strings.Fields(*v)
	slices.Sort(got)
	var want []string
	for _, k := range []string{workflows.SearchAttributeSessionID.GetName(), workflows.SearchAttributeSessionPhase.GetName(), workflows.SearchAttributeSessionCwd.GetName()} {
		want = append(want, k+"=Keyword")
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return []error{fmt.Errorf("%s: SEARCH_ATTRIBUTES = %q, want %q", svcNamespace, got, want)}
	}
	return nil
}

func TestCompose(t *testing.T) {
	p := loadProject(t)
	assert.Equal(t, "sessionflow", p.Name)
	runChecks(t, p, composeChecks)
}

// TestComposeChecksDetectBreakage breaks the loaded project in one way at a time and requires the
// check responsible for that property to report it, so a check that passes vacuously fails here.
func TestComposeChecksDetectBreakage(t *testing.T) {
	edit := editService
	str := func(s string) *string { return &s }
	cases := []struct {
		name   string
		check  check
		mutate func(*types.Project)
	}{
		{"extra service", checkServiceSet, func(p *types.Project) {
			extra := types.ServiceConfig{Name: "temporal-auto-setup"}
			extra.Image = "temporalio/auto-setup:" + serverVersion
			p.Services[extra.Name] = extra
		}},
		{"missing service", checkServiceSet, func(p *types.Project) { delete(p.Services, svcUI) }},
		{"latest tag", checkImagesPinned, edit(svcUI, func(s *types.ServiceConfig) { s.Image = "temporalio/ui:latest" })},
		{"untagged image", checkImagesPinned, edit(svcPostgres, func(s *types.ServiceConfig) { s.Image = "postgres" })},
		{"other server version", checkImagesPinned, edit(svcServer, func(s *types.ServiceConfig) { s.Image = "temporalio/server:1.30.1" })},
		{"deprecated auto-setup", checkImagesPinned, edit(svcServer, func(s *types.ServiceConfig) { s.Image = "temporalio/auto-setup:" + serverVersion })},
		{"admin-tools of another release", checkImagesPinned, edit(svcSchema, func(s *types.ServiceConfig) { s.Image = "temporalio/admin-tools:1.28.0-tctl-1.18.4-cli-1.4.0" })},
		{"metrics port dropped", checkPublishedPorts, edit(svcWorker, func(s *types.ServiceConfig) { s.Ports = nil })},
		{"ui on another host port", checkPublishedPorts, edit(svcUI, func(s *types.ServiceConfig) { s.Ports[0].Published = "8088" })},
		{"database published", checkPublishedPorts, edit(svcPostgres, func(s *types.ServiceConfig) {
			s.Ports = []types.ServicePortConfig{{Target: 5432, Published: "5432", Protocol: "tcp"}}
		})},
		{"store volume undeclared", checkStoreVolume, func(p *types.Project) { delete(p.Volumes, storeVolume) }},
		{"store on a bind mount", checkStoreVolume, edit(svcWorker, func(s *types.ServiceConfig) {
			s.Volumes = []types.ServiceVolumeConfig{{Type: types.VolumeTypeBind, Source: "/tmp/store", Target: storeRoot}}
		})},
		{"store mounted elsewhere", checkStoreVolume, edit(svcWorker, func(s *types.ServiceConfig) { s.Volumes[0].Target = "/data" })},
		{"store read-only", checkStoreVolume, edit(svcWorker, func(s *types.ServiceConfig) { s.Volumes[0].ReadOnly = true })},
		{"server starts before schema", checkStartOrder, edit(svcServer, func(s *types.ServiceConfig) {
			s.DependsOn = types.DependsOnConfig{svcSchema: {Condition: types.ServiceConditionStarted, Required: true}}
		})},
		{"worker ignores server health", checkStartOrder, edit(svcWorker, func(s *types.ServiceConfig) { delete(s.DependsOn, svcServer) })},
		{"schema job restarts", checkStartOrder, edit(svcSchema, func(s *types.ServiceConfig) { s.Restart = types.RestartPolicyOnFailure })},
		{"ui waits on nothing", checkStartOrder, edit(svcUI, func(s *types.ServiceConfig) { s.DependsOn = nil })},
		{"postgres healthcheck gone", checkHealthchecks, edit(svcPostgres, func(s *types.ServiceConfig) { s.HealthCheck = nil })},
		{"server healthcheck disabled", checkHealthchecks, edit(svcServer, func(s *types.ServiceConfig) { s.HealthCheck.Disable = true })},
		{"server healthcheck on another port", checkHealthchecks, edit(svcServer, func(s *types.ServiceConfig) {
			s.HealthCheck.Test = types.HealthCheckTest{"CMD", "temporal", "operator", "cluster", "health", "--address", "localhost:7234"}
		})},
		{"worker env extra key", checkWorkerEnvironment, edit(svcWorker, func(s *types.ServiceConfig) { s.Environment["DEBUG"] = str("1") })},
		{"worker env wrong queue", checkWorkerEnvironment, edit(svcWorker, func(s *types.ServiceConfig) { s.Environment["SESSIONFLOW_TASK_QUEUE"] = str("default") })},
		{"worker env missing compression", checkWorkerEnvironment, edit(svcWorker, func(s *types.ServiceConfig) { delete(s.Environment, "SESSIONFLOW_COMPRESSION") })},
		{"worker dials localhost", checkAddresses, edit(svcWorker, func(s *types.ServiceConfig) { s.Environment["TEMPORAL_ADDRESS"] = str("localhost:7233") })},
		{"ui dials the wrong port", checkAddresses, edit(svcUI, func(s *types.ServiceConfig) { s.Environment["TEMPORAL_ADDRESS"] = str("temporal:7234") })},
		{"server password differs", checkAddresses, edit(svcServer, func(s *types.ServiceConfig) { s.Environment["POSTGRES_PWD"] = str("secret") })},
		{"schema job on mysql", checkAddresses, edit(svcSchema, func(s *types.ServiceConfig) { s.Environment["SQL_PLUGIN"] = str("mysql8") })},
		{"job script missing", checkOneShotJobs, edit(svcSchema, func(s *types.ServiceConfig) {
			s.Entrypoint = types.ShellCommand{"/bin/sh", "/scripts/no-such-script.sh"}
		})},
		{"job script not mounted", checkOneShotJobs, edit(svcNamespace, func(s *types.ServiceConfig) { s.Volumes = nil })},
		{"search attribute missing", checkSearchAttributes, edit(svcNamespace, func(s *types.ServiceConfig) {
			s.Environment["SEARCH_ATTRIBUTES"] = str("SessionId=Keyword SessionCwd=Keyword")
		})},
		{"search attribute as text", checkSearchAttributes, edit(svcNamespace, func(s *types.ServiceConfig) {
			s.Environment["SEARCH_ATTRIBUTES"] = str("SessionId=Keyword SessionPhase=Text SessionCwd=Keyword")
		})},
		{"job restarts", checkOneShotJobs, edit(svcNamespace, func(s *types.ServiceConfig) { s.Restart = types.RestartPolicyAlways })},
		{"dynamic config missing", checkServerDynamicConfig, edit(svcServer, func(s *types.ServiceConfig) {
			s.Environment["DYNAMIC_CONFIG_FILE_PATH"] = str("config/dynamicconfig/absent.yaml")
		})},
		{"dynamic config not mounted", checkServerDynamicConfig, edit(svcServer, func(s *types.ServiceConfig) { s.Volumes = nil })},
		{"short grace period", checkWorkerLifecycle, edit(svcWorker, func(s *types.ServiceConfig) {
			d := types.Duration(10 * time.Second)
			s.StopGracePeriod = &d
		})},
		{"worker not restarted", checkWorkerLifecycle, edit(svcWorker, func(s *types.ServiceConfig) { s.Restart = types.RestartPolicyNo })},
		{"worker killed on stop", checkWorkerLifecycle, edit(svcWorker, func(s *types.ServiceConfig) { s.StopSignal = "SIGKILL" })},
		{"worker build gone", checkWorkerBuild, edit(svcWorker, func(s *types.ServiceConfig) { s.Build = nil })},
		{"worker built from deploy/", checkWorkerBuild, edit(svcWorker, func(s *types.ServiceConfig) {
			s.Build.Context = filepath.Join(s.Build.Context, "deploy")
		})},
		{"worker dockerfile missing", checkWorkerBuild, edit(svcWorker, func(s *types.ServiceConfig) { s.Build.Dockerfile = "Dockerfile" })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := loadProject(t)
			require.Empty(t, tc.check(p), "the intact project must pass")
			tc.mutate(p)
			assert.NotEmpty(t, tc.check(p), "the check must report the breakage")
		})
	}
}

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	cmd  string // upper case
	args string
}

type stage struct {
	from, name string
	body       []instruction
}

func parseDockerfile(text string) ([]stage, error) {
	var (
		stages  []stage
		pending strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && pending.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(cont)
			pending.WriteString(" ")
			continue
		}
		pending.WriteString(line)
		full := strings.Join(strings.Fields(pending.String()), " ")
		pending.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: args}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				continue
			}
			return nil, fmt.Errorf("%s before the first FROM", in.cmd)
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	if pending.Len() > 0 {
		return nil, errors.New("dangling line continuation")
	}
	return stages, sc.Err()
}

func (s stage) find(cmd string, match func(args string) bool) int {
	return slices.IndexFunc(s.body, func(in instruction) bool { return in.cmd == cmd && match(in.args) })
}

var goBuild = regexp.MustCompile(`(^|&& )CGO_ENABLED=0 go build (.* )?-trimpath (.* )?-o (\S+) \./worker( |$)`)

func checkDockerfile(text string) []error {
	stages, err := parseDockerfile(text)
	if err != nil {
		return []error{err}
	}
	if len(stages) < 2 {
		return problems("Dockerfile has %d stages, want a builder and a runtime stage", len(stages))
	}
	var errs []error
	b, rt := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(b.from, "golang:1.26") || b.name == "" {
		errs = append(errs, fmt.Errorf("builder stage is FROM %s AS %q, want a named golang:1.26 stage", b.from, b.name))
	}
	copyMod := b.find("COPY", func(a string) bool { return a == "go.mod go.sum ./" })
	download := b.find("RUN", func(a string) bool { return strings.HasPrefix(a, "go mod download") })
	copyAll := b.find("COPY", func(a string) bool { return a == ". ." })
	var out string
	build := b.find("RUN", func(a string) bool {
		if m := goBuild.FindStringSubmatch(a); m != nil {
			out = m[4]
			return true
		}
		return false
	})
	switch {
	case copyMod < 0 || download < 0 || copyAll < 0 || build < 0:
		errs = append(errs, fmt.Errorf("builder needs COPY go.mod go.sum, go mod download, COPY . . and a static -trimpath go build of ./worker (found at %d %d %d %d)",
			copyMod, download, copyAll, build))
	case !(copyMod < download && download < copyAll && copyAll < build):
		errs = append(errs, fmt.Errorf("builder steps out of order: the module download layer must come before the source copy and the build"))
	}
	if strings.HasPrefix(rt.from, "golang") {
		errs = append(errs, fmt.Errorf("runtime stage is the Go toolchain image %s", rt.from))
	}
	user := ""
	for _, in := range rt.body {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		errs = append(errs, fmt.Errorf("runtime stage runs as %q, want a non-root USER", user))
	}
	var binary string
	if out != "" && b.name != "" {
		i := rt.find("COPY", func(a string) bool {
			f := strings.Fields(a)
			return len(f) >= 3 && f[0] == "--from="+b.name && f[len(f)-2] == out
		})
		if i < 0 {
			errs = append(errs, fmt.Errorf("runtime stage does not copy %s from %s", out, b.name))
		} else {
			f := strings.Fields(rt.body[i].args)
			binary = f[len(f)-1]
		}
	}
	ep := rt.find("ENTRYPOINT", func(string) bool { return true })
	if ep < 0 || binary == "" || !strings.HasPrefix(rt.body[ep].args, fmt.Sprintf(`[%q`, binary)) {
		errs = append(errs, fmt.Errorf("runtime ENTRYPOINT must run the worker binary %q in exec form", binary))
	}
	if rt.find("COPY", func(a string) bool {
		f := strings.Fields(a)
		return len(f) >= 2 && f[len(f)-1] == storeRoot && slices.Contains(f, "--chown="+user)
	}) < 0 {
		errs = append(errs, fmt.Errorf("runtime stage must create %s owned by %q so a fresh volume is writable", storeRoot, user))
	}
	if rt.find("EXPOSE", func(a string) bool { return slices.Contains(strings.Fields(a), "9090") }) < 0 {
		errs = append(errs, fmt.Errorf("runtime stage does not EXPOSE the metrics port 9090"))
	}
	return errs
}

func readDockerfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	return string(b)
}

func TestDockerfile(t *testing.T) {
	for _, err := range checkDockerfile(readDockerfile(t)) {
		t.Error(err)
	}
}

func TestDockerfileCheckDetectsBreakage(t *testing.T) {
	text := readDockerfile(t)
	require.Empty(t, checkDockerfile(text))
	replace := func(old, new string) func(string) string {
		return func(s string) string {
			require.Contains(t, s, old)
			return strings.Replace(s, old, new, 1)
		}
	}
	dropLine := func(prefix string) func(string) string {
		return func(s string) string {
			var kept []string
			for _, l := range strings.Split(s, "\n") {
				if !strings.HasPrefix(l, prefix) {
					kept = append(kept, l)
				}
			}
			require.Less(t, len(kept), strings.Count(s, "\n")+1, "no line starts with %q", prefix)
			return strings.Join(kept, "\n")
		}
	}
	cases := map[string]func(string) string{
		"runs as root":          replace("USER 65532:65532", "USER root"),
		"no USER":               dropLine("USER "),
		"builds the starter":    replace("./worker", "./cmd/starter"),
		"cgo enabled":           replace("CGO_ENABLED=0 ", ""),
		"no trimpath":           replace("-trimpath ", ""),
		"no module layer":       dropLine("RUN go mod download"),
		"source copied first":   replace("COPY go.mod go.sum ./", "COPY . ."),
		"old toolchain":         replace("golang:1.26-bookworm", "golang:1.22-bookworm"),
		"single stage":          dropLine("FROM gcr.io/"),
		"entrypoint elsewhere":  replace(`ENTRYPOINT ["/usr/local/bin/sessionflow-worker"]`, `ENTRYPOINT ["/worker"]`),
		"store owned by root":   replace("--chown=65532:65532 ", ""),
		"metrics port unlisted": dropLine("EXPOSE "),
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			assert.NotEmpty(t, checkDockerfile(mutate(text)))
		})
	}
}

// ignoredBy reports whether a path (slash-separated, relative to the build context) is left out
// of the context by a .dockerignore with the given patterns. It supports the pattern forms used
// here: plain paths and globs, "**/"-prefixed globs, and "!" exceptions.
func ignoredBy(patterns []string, rel string) bool {
	ignored := false
	for _, pat := range patterns {
		negate := strings.HasPrefix(pat, "!")
		pat = strings.TrimPrefix(pat, "!")
		if matchIgnore(pat, rel) {
			ignored = !negate
		}
	}
	return ignored
}

func matchIgnore(pat, rel string) bool {
	segs := strings.Split(rel, "/")
	pfx, anyDepth := strings.CutPrefix(pat, "**/")
	for start := 0; start < len(segs); start++ {
		if start > 0 && !anyDepth {
			break
		}
		for end := start + 1; end <= len(segs); end++ {
			if ok, _ := path.Match(pfx, strings.Join(segs[start:end], "/")); ok {
				return true
			}
		}
	}
	return false
}

func readIgnore(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("Dockerfile.dockerignore")
	require.NoError(t, err)
	var pats []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, l)
		}
	}
	return pats
}

// goPackagesForImage lists, relative to the module root, the files `go build ./worker` may need:
// go.mod, go.sum and every non-test Go file of the main module outside deploy/ (nested modules,
// testdata and directories Go ignores are skipped).
func goPackagesForImage(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"go.mod", "go.sum"}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			base := d.Name()
			if rel == "deploy" || base == "testdata" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			files = append(files, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

func TestBuildContextKeepsModuleSources(t *testing.T) {
	pats := readIgnore(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	files := goPackagesForImage(t, root)
	require.Contains(t, files, "session/event.go", "the walk must see the module's packages")
	for _, f := range files {
		assert.False(t, ignoredBy(pats, f), "%s is excluded from the image build context", f)
	}
	for _, f := range []string{".git/HEAD", "tools/go.mod", "jsonl/testdata/x.jsonl", "session/event_test.go"} {
		assert.True(t, ignoredBy(pats, f), "%s should stay out of the build context", f)
	}
	assert.True(t, ignoredBy(append(slices.Clone(pats), "session"), "session/event.go"),
		"the matcher must see a directory pattern exclude the files below it")
}

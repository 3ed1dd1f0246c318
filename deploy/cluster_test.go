package deploy_test

// The compose stack and the local cluster launcher (internal/app/cluster) run
// one configuration: these checks hold the stack to the files and values
// the launcher uses.

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/deploy"
	"github.com/sessionflow/sessionflow/internal/app/cluster"
)

// serverWorkDir is the working directory of the temporalio/server image, to
// which the server resolves relative paths.
const serverWorkDir = "/etc/temporal"

// hostDir returns the absolute host path of a file of this directory.
func hostDir(rel string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, filepath.FromSlash(rel)), nil
}

// containerPath resolves a path the server is given against its working
// directory.
func containerPath(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(serverWorkDir, p)
	}
	return p
}

// checkServerConfigShared: the server loads its configuration from the
// directory the launcher uses (deploy.ServerConfigDir), mounted from this
// directory, and nothing in its environment overrides the shard count.
func checkServerConfigShared(p *types.Project) []error {
	s, err := service(p, svcServer)
	if err != nil {
		return []error{err}
	}
	e := env(s)
	var errs []error
	if _, ok := e["NUM_HISTORY_SHARDS"]; ok {
		errs = append(errs, fmt.Errorf("%s sets NUM_HISTORY_SHARDS; the shard count is the configuration file's", svcServer))
	}
	dir := e["TEMPORAL_CONFIG_DIR"]
	if dir == "" {
		return append(errs, fmt.Errorf("%s has no TEMPORAL_CONFIG_DIR: it would run the image's own configuration", svcServer))
	}
	src, ok := hostPath(s, containerPath(dir))
	if !ok {
		return append(errs, fmt.Errorf("%s: configuration directory %s is not under a bind mount", svcServer, containerPath(dir)))
	}
	want, err := hostDir(deploy.ServerConfigDir)
	if err != nil {
		return append(errs, err)
	}
	if filepath.Clean(src) != want {
		errs = append(errs, fmt.Errorf("%s: configuration directory is %s on the host, the launcher's is %s", svcServer, src, want))
	}
	if err := regularFile(filepath.Join(src, deploy.ServerEnv+".yaml")); err != nil {
		errs = append(errs, fmt.Errorf("%s: configuration file: %w", svcServer, err))
	}
	return errs
}

// checkDynamicConfigShared: the server's dynamic config is the file the
// launcher uses.
func checkDynamicConfigShared(p *types.Project) []error {
	s, err := service(p, svcServer)
	if err != nil {
		return []error{err}
	}
	file := env(s)["DYNAMIC_CONFIG_FILE_PATH"]
	src, ok := hostPath(s, containerPath(file))
	if !ok {
		return problems("%s: dynamic config %q is not under a bind mount", svcServer, file)
	}
	want, err := hostDir(deploy.DynamicConfigFile)
	if err != nil {
		return []error{err}
	}
	if filepath.Clean(src) != want {
		return problems("%s: dynamic config is %s on the host, the launcher's is %s", svcServer, src, want)
	}
	return nil
}

// checkNamespaceShared: the namespace job registers the namespace, the
// retention and the search attributes the launcher gives the same script.
func checkNamespaceShared(p *types.Project) []error {
	s, err := service(p, svcNamespace)
	if err != nil {
		return []error{err}
	}
	e := env(s)
	var errs []error
	got := strings.Fields(e["SEARCH_ATTRIBUTES"])
	slices.Sort(got)
	if want := strings.Fields(cluster.SearchAttributesEnv()); !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("%s: SEARCH_ATTRIBUTES %q, the launcher registers %q", svcNamespace, got, want))
	}
	if e["NAMESPACE"] != cluster.Namespace || e["NAMESPACE_RETENTION"] != cluster.NamespaceRetention {
		errs = append(errs, fmt.Errorf("%s: namespace %q with retention %q, the launcher's is %q with %q",
			svcNamespace, e["NAMESPACE"], e["NAMESPACE_RETENTION"], cluster.Namespace, cluster.NamespaceRetention))
	}
	return errs
}

// checkServerVersionShared: the stack's server image is the release the
// launcher builds.
func checkServerVersionShared(p *types.Project) []error {
	s, err := service(p, svcServer)
	if err != nil {
		return []error{err}
	}
	if want := "temporalio/server:" + strings.TrimPrefix(cluster.ServerVersion, "v"); s.Image != want {
		return problems("%s: image %s, the launcher builds %s", svcServer, s.Image, want)
	}
	return nil
}

var sharedChecks = []namedCheck{
	{"ServerConfig", checkServerConfigShared},
	{"DynamicConfig", checkDynamicConfigShared},
	{"Namespace", checkNamespaceShared},
	{"ServerVersion", checkServerVersionShared},
}

func TestComposeAndLauncherShareConfiguration(t *testing.T) {
	runChecks(t, loadProject(t), sharedChecks)
}

func TestSharedConfigurationChecksDetectDrift(t *testing.T) {
	edit := editService
	str := func(s string) *string { return &s }
	dropMount := func(target string) func(*types.ServiceConfig) {
		return func(s *types.ServiceConfig) {
			s.Volumes = slices.DeleteFunc(slices.Clone(s.Volumes), func(v types.ServiceVolumeConfig) bool { return v.Target == target })
		}
	}
	cases := []struct {
		name   string
		check  check
		mutate func(*types.Project)
	}{
		{"image's own configuration", checkServerConfigShared, edit(svcServer, func(s *types.ServiceConfig) { delete(s.Environment, "TEMPORAL_CONFIG_DIR") })},
		{"configuration not mounted", checkServerConfigShared, edit(svcServer, dropMount("/etc/temporal/config/sessionflow"))},
		{"configuration from elsewhere", checkServerConfigShared, edit(svcServer, func(s *types.ServiceConfig) {
			for i := range s.Volumes {
				if s.Volumes[i].Target == "/etc/temporal/config/sessionflow" {
					s.Volumes[i].Source = filepath.Join(filepath.Dir(s.Volumes[i].Source), "other")
				}
			}
		})},
		{"shards from the environment", checkServerConfigShared, edit(svcServer, func(s *types.ServiceConfig) { s.Environment["NUM_HISTORY_SHARDS"] = str("1") })},
		{"another dynamic config", checkDynamicConfigShared, edit(svcServer, func(s *types.ServiceConfig) {
			s.Environment["DYNAMIC_CONFIG_FILE_PATH"] = str("config/dynamicconfig/docker.yaml")
		})},
		{"dynamic config not mounted", checkDynamicConfigShared, edit(svcServer, dropMount("/etc/temporal/config/dynamicconfig"))},
		{"search attribute missing", checkNamespaceShared, edit(svcNamespace, func(s *types.ServiceConfig) {
			s.Environment["SEARCH_ATTRIBUTES"] = str("SessionId=Keyword SessionPhase=Keyword")
		})},
		{"other retention", checkNamespaceShared, edit(svcNamespace, func(s *types.ServiceConfig) { s.Environment["NAMESPACE_RETENTION"] = str("24h") })},
		{"other namespace", checkNamespaceShared, edit(svcNamespace, func(s *types.ServiceConfig) { s.Environment["NAMESPACE"] = str("sessions") })},
		{"other server release", checkServerVersionShared, edit(svcServer, func(s *types.ServiceConfig) { s.Image = "temporalio/server:1.29.0" })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := loadProject(t)
			require.Empty(t, tc.check(p), "the intact project must pass")
			tc.mutate(p)
			assert.NotEmpty(t, tc.check(p), "the check must report the drift")
		})
	}
}

var shardsLine = regexp.MustCompile(`(?m)^\s*numHistoryShards:\s*(\S+)\s*$`)

// configuredShards reads numHistoryShards from a server configuration.
func configuredShards(text string) (int, error) {
	m := shardsLine.FindAllStringSubmatch(text, -1)
	if len(m) != 1 {
		return 0, fmt.Errorf("%d numHistoryShards lines, want 1", len(m))
	}
	n, err := strconv.Atoi(m[0][1])
	if err != nil {
		return 0, fmt.Errorf("numHistoryShards %q is not a fixed number: %w", m[0][1], err)
	}
	return n, nil
}

// TestServerConfigurationShards: the configuration fixes the shard count
// the launcher's tests expect, several shards as in production.
func TestServerConfigurationShards(t *testing.T) {
	b, err := deploy.Files.ReadFile(path.Join(deploy.ServerConfigDir, deploy.ServerEnv+".yaml"))
	require.NoError(t, err)
	n, err := configuredShards(string(b))
	require.NoError(t, err)
	require.Equal(t, cluster.HistoryShards, n)
	require.GreaterOrEqual(t, n, 4)

	for _, bad := range []string{
		"persistence:\n    numHistoryShards: {{ default \"4\" (env \"NUM_HISTORY_SHARDS\") }}\n",
		"persistence:\n    defaultStore: default\n",
		"a:\n    numHistoryShards: 4\nb:\n    numHistoryShards: 8\n",
	} {
		_, err := configuredShards(bad)
		require.Error(t, err, bad)
	}
}

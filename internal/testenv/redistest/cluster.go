package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterNodes = 6
	// busOffset is where Redis Cluster puts a node's bus port, above its client port.
	busOffset = 10000
	// Base ports are drawn below the kernel's ephemeral range (32768 and up on Linux), with their
	// bus ports, so that no outgoing connection holds one, and away from the shared 6379.
	minBase, maxBase = 12000, 22000

	startTimeout = 2 * time.Minute
	stopTimeout  = time.Minute
	// manualFailoverRetry: Redis drops a manual failover that has not completed in 5 s (the
	// replica must first catch up with its master); after this long it is asked again.
	manualFailoverRetry = 6 * time.Second
)

// Cluster is a private Redis Cluster of 3 masters and 3 replicas on consecutive loopback ports,
// run by scripts/cluster.sh. Masters and Replicas report failures through the test and must be
// called from the test's goroutine.
type Cluster struct {
	t      testing.TB
	script string
	base   int
	dir    string
	// killed are the nodes KillNode killed; they are never listed or waited for.
	killed map[string]bool
	// paused are the nodes PauseReplica stopped and ResumeNode did not resume yet: they answer
	// nothing, so they are not asked.
	paused map[string]bool

	watchdog *watchdog
}

// StartCluster starts a cluster on six free consecutive ports and returns once every node reports
// the cluster ok, every slot served and every replica in sync. It is stopped when the test ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	lookRedis(t, "redis-server")
	lookRedis(t, "redis-cli")
	script := clusterScript(t)
	c := &Cluster{t: t, script: script, dir: t.TempDir(), killed: map[string]bool{}, paused: map[string]bool{}}
	logDir := t.TempDir()
	t.Cleanup(c.Stop)

	// The ports are free when picked but another test binary may take one before the nodes bind
	// it ("in use", from the script or a node's log): then stop what started and pick others.
	var out []byte
	for attempt := 1; attempt == 1 || attempt <= 3 && bytes.Contains(out, []byte("in use")); attempt++ {
		c.base = freeRange(t)
		var err error
		c.watchdog, err = startWatchdog(script, c.base, c.dir, filepath.Join(logDir, fmt.Sprintf("stop-%d.log", attempt)))
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		began := time.Now()
		out, err = c.run(startTimeout, "start")
		if err == nil {
			t.Logf("redistest: cluster on 127.0.0.1:%d-%d ready in %v", c.base, c.base+clusterNodes-1,
				time.Since(began).Round(time.Millisecond))
			return c
		}
		c.Stop()
	}
	t.Fatalf("redistest: scripts/cluster.sh start failed:\n%s", out)
	return nil
}

// Stop stops every node and removes the cluster's directory; it waits until they are gone. It is
// called when the test ends, and may be called before.
func (c *Cluster) Stop() {
	if c.watchdog == nil {
		return
	}
	// A stopped node would not hear cluster.sh's SHUTDOWN, and cost the script a wait.
	for addr := range c.paused {
		c.ResumeNode(addr)
	}
	if out, err := c.watchdog.stop(stopTimeout); err != nil {
		c.t.Errorf("redistest: scripts/cluster.sh stop: %v\n%s", err, out)
	}
}

// URL is the seed URL for redis.ParseClusterURL: the first node, with the next two as more seeds.
func (c *Cluster) URL() string {
	return fmt.Sprintf("redis://127.0.0.1:%d?addr=127.0.0.1:%d&addr=127.0.0.1:%d", c.base, c.base+1, c.base+2)
}

// Addrs are the six nodes' "127.0.0.1:port", masters and replicas alike.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, clusterNodes)
	for i := range addrs {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.base+i))
	}
	return addrs
}

// Client returns a new cluster client seeded with URL, closed when the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	c.t.Helper()
	opts, err := redis.ParseClusterURL(c.URL())
	if err != nil {
		c.t.Fatalf("redistest: %v", err)
	}
	client := redis.NewClusterClient(opts)
	c.t.Cleanup(func() { _ = client.Close() })
	return client
}

// Masters are the addresses of the nodes that are masters now, as CLUSTER NODES tells, sorted; a
// node killed by KillNode is not one.
func (c *Cluster) Masters() []string { return c.nodesWithFlag("master") }

// Replicas are the addresses of the nodes that are replicas now, sorted.
func (c *Cluster) Replicas() []string { return c.nodesWithFlag("slave") }

func (c *Cluster) nodesWithFlag(flag string) []string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lastErr error
	for _, addr := range c.Addrs() {
		if c.paused[addr] {
			continue
		}
		nodes, err := clusterNodesOf(ctx, addr)
		if err != nil {
			lastErr = err
			continue
		}
		var addrs []string
		for _, n := range nodes {
			if n.has(flag) && !n.has("fail") && !n.has("fail?") && !n.has("noaddr") && !n.has("handshake") && !c.killed[n.addr] {
				addrs = append(addrs, n.addr)
			}
		}
		slices.Sort(addrs)
		return addrs
	}
	c.t.Fatalf("redistest: no node answers CLUSTER NODES: %v", lastErr)
	return nil
}

// Failover runs CLUSTER FAILOVER on replicaAddr, a replica, and waits until it reports the role of
// master, every node lists it as a master and its old master as a replica, and every node reports
// the cluster ok. A manual failover
// (not FORCE) lets the replica catch up with its master first, so what the master acknowledged is
// kept.
func (c *Cluster) Failover(ctx context.Context, replicaAddr string) error {
	clients, closeAll := c.liveClients()
	defer closeAll()
	replica, ok := clients[replicaAddr]
	if !ok {
		return fmt.Errorf("failover: %s is not a node of this cluster (%v)", replicaAddr, c.Addrs())
	}
	if err := replica.ClusterFailover(ctx).Err(); err != nil {
		return fmt.Errorf("failover: CLUSTER FAILOVER on %s: %w", replicaAddr, err)
	}
	asked := time.Now()
	for {
		err := promoted(ctx, clients, replicaAddr, func(n clusterNode) bool { return n.has("master") })
		if err == nil {
			return nil
		}
		if time.Since(asked) > manualFailoverRetry && !isMaster(ctx, replica) {
			if ferr := replica.ClusterFailover(ctx).Err(); ferr != nil {
				return fmt.Errorf("failover: CLUSTER FAILOVER on %s again: %w", replicaAddr, ferr)
			}
			asked = time.Now()
		}
		// No event announces the end of a failover: poll.
		select {
		case <-ctx.Done():
			return fmt.Errorf("failover of %s: %w (last: %v)", replicaAddr, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// promoted is nil once addr is a master by its own ROLE and in every node's CLUSTER NODES, every
// node counts three masters (the nodes master counts), and every node reports cluster_state:ok.
func promoted(ctx context.Context, clients map[string]*redis.Client, addr string, master func(clusterNode) bool) error {
	if !isMaster(ctx, clients[addr]) {
		return fmt.Errorf("%s is not a master yet", addr)
	}
	for node, cl := range clients {
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", node, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s does not report cluster_state:ok", node)
		}
		nodes, err := parseClusterNodes(cl.ClusterNodes(ctx).Val())
		if err != nil {
			return fmt.Errorf("CLUSTER NODES on %s: %w", node, err)
		}
		i := slices.IndexFunc(nodes, func(n clusterNode) bool { return n.addr == addr })
		if i < 0 || !nodes[i].has("master") {
			return fmt.Errorf("%s does not list %s as a master yet", node, addr)
		}
		// The old master learns of its demotion, and tells the others, by gossip.
		if masters := countFunc(nodes, master); masters != clusterNodes/2 {
			return fmt.Errorf("%s lists %d masters", node, masters)
		}
	}
	return nil
}

// ReplicaOf is the address of a replica of the master at masterAddr, as CLUSTER NODES tells.
func (c *Cluster) ReplicaOf(masterAddr string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lastErr error
	for _, addr := range c.Addrs() {
		if c.killed[addr] || c.paused[addr] {
			continue
		}
		nodes, err := clusterNodesOf(ctx, addr)
		if err != nil {
			lastErr = err
			continue
		}
		i := slices.IndexFunc(nodes, func(n clusterNode) bool { return n.addr == masterAddr })
		if i < 0 {
			c.t.Fatalf("redistest: %s is not a node of this cluster", masterAddr)
		}
		for _, n := range nodes {
			if n.master == nodes[i].id && n.has("slave") {
				return n.addr
			}
		}
		c.t.Fatalf("redistest: %s has no replica", masterAddr)
	}
	c.t.Fatalf("redistest: no node answers CLUSTER NODES: %v", lastErr)
	return ""
}

// KillNode kills the node at addr with SIGKILL, as a crash would, and waits for its process to be
// gone. The other nodes find out by themselves (cluster-node-timeout is 2 s).
func (c *Cluster) KillNode(addr string) {
	c.t.Helper()
	pid := c.nodePID(addr)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		c.t.Fatalf("redistest: kill the node on %s: %v", addr, err)
	}
	c.killed[addr] = true
	deadline := time.Now().Add(killTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: the node on %s (pid %d) did not die within %v of SIGKILL", addr, pid, killTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PauseReplica cuts the replica at addr off its master's writes, which the master keeps
// acknowledging, as Replicated.PauseReplica does for a pair: it stops the replica's process
// (SIGSTOP), then has the master drop its replication link, since a stopped process' kernel would
// keep receiving the stream and the replica would apply it once resumed. In a cluster the other
// nodes also stop hearing from the replica on the bus and flag it as failing after
// cluster-node-timeout; that matters to nobody while its master lives, and is cleared once it
// answers again. Writes from now on reach the replica only if it is resumed (ResumeNode) while
// its master lives; a paused replica can take no failover over until resumed.
func (c *Cluster) PauseReplica(addr string) {
	c.t.Helper()
	master := c.masterOf(addr)
	if err := syscall.Kill(c.nodePID(addr), syscall.SIGSTOP); err != nil {
		c.t.Fatalf("redistest: stop the node on %s: %v", addr, err)
	}
	c.paused[addr] = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := redis.NewClient(&redis.Options{Addr: master, DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = m.Close() }()
	if err := m.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		c.t.Fatalf("redistest: drop the replica's link on %s: %v", master, err)
	}
	// Each master has one replica: once none is listed, nothing more reaches the paused one.
	for {
		info, err := m.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:0") {
			return
		}
		if ctx.Err() != nil {
			c.t.Fatalf("redistest: the master %s still lists its replica: %v\n%s", master, err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ResumeNode lets a node PauseReplica stopped run again (SIGCONT).
func (c *Cluster) ResumeNode(addr string) {
	c.t.Helper()
	if err := syscall.Kill(c.nodePID(addr), syscall.SIGCONT); err != nil {
		c.t.Fatalf("redistest: resume the node on %s: %v", addr, err)
	}
	delete(c.paused, addr)
}

// masterOf is the address of the master of the replica at addr, as CLUSTER NODES tells.
func (c *Cluster) masterOf(addr string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := clusterNodesOf(ctx, addr)
	if err != nil {
		c.t.Fatalf("redistest: CLUSTER NODES on %s: %v", addr, err)
	}
	i := slices.IndexFunc(nodes, func(n clusterNode) bool { return n.addr == addr })
	if i < 0 || !nodes[i].has("slave") {
		c.t.Fatalf("redistest: %s is not a replica", addr)
	}
	j := slices.IndexFunc(nodes, func(n clusterNode) bool { return n.id == nodes[i].master })
	if j < 0 {
		c.t.Fatalf("redistest: the master of %s is not listed", addr)
	}
	return nodes[j].addr
}

// nodePID is the process of the node at addr. The nodes are daemons of cluster.sh, not children of
// the test: it reads the pid file the script gave the node, and checks that the process is still
// that node.
func (c *Cluster) nodePID(addr string) int {
	c.t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil || !slices.Contains(c.Addrs(), addr) {
		c.t.Fatalf("redistest: %s is not a node of this cluster (%v)", addr, c.Addrs())
	}
	b, err := os.ReadFile(filepath.Join(c.dir, port+".pid"))
	if err != nil {
		c.t.Fatalf("redistest: pid of the node on %s: %v", addr, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		c.t.Fatalf("redistest: pid file of the node on %s: %v", addr, err)
	}
	if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); !bytes.Contains(cmd, []byte("redis-server")) ||
		!bytes.Contains(cmd, []byte(":"+port)) {
		c.t.Fatalf("redistest: process %d is not the node on %s (%q)", pid, addr, cmd)
	}
	return pid
}

// alive reports whether pid is a process that has not exited (a zombie waiting to be reaped has).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	_, rest, ok := bytes.Cut(stat, []byte(") "))
	return ok && len(rest) > 0 && rest[0] != 'Z' && rest[0] != 'X'
}

// liveClients opens a client of every node not killed, by address; closeAll closes them.
func (c *Cluster) liveClients() (clients map[string]*redis.Client, closeAll func()) {
	clients = map[string]*redis.Client{}
	for _, addr := range c.Addrs() {
		if !c.killed[addr] {
			clients[addr] = redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
		}
	}
	return clients, func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}
}

// Takeover runs CLUSTER FAILOVER TAKEOVER on replicaAddr, a replica whose master is dead (KillNode):
// the replica takes its master's slots without the agreement of the other masters, and at once,
// rather than after cluster-node-timeout and an election. It waits until the replica reports the
// role of master, every live node lists it as a master and serves three masters' worth of slots,
// and every live node reports the cluster ok.
func (c *Cluster) Takeover(ctx context.Context, replicaAddr string) error {
	clients, closeAll := c.liveClients()
	defer closeAll()
	replica, ok := clients[replicaAddr]
	if !ok {
		return fmt.Errorf("takeover: %s is not a live node of this cluster (%v)", replicaAddr, c.Addrs())
	}
	// Should the replica have been elected meanwhile (cluster-node-timeout after the kill), it is
	// a master already and refuses; then only the wait remains.
	if err := replica.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil && !isMaster(ctx, replica) {
		return fmt.Errorf("takeover: CLUSTER FAILOVER TAKEOVER on %s: %w", replicaAddr, err)
	}
	// The dead master stays listed as a master, without slots, until it comes back as a replica.
	servesSlots := func(n clusterNode) bool { return n.has("master") && n.slots }
	for {
		err := promoted(ctx, clients, replicaAddr, servesSlots)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("takeover by %s: %w (last: %v)", replicaAddr, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func countFunc[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}

func isMaster(ctx context.Context, c *redis.Client) bool {
	role, err := c.Do(ctx, "ROLE").Slice()
	return err == nil && len(role) > 0 && role[0] == "master"
}

// clusterNode is one line of CLUSTER NODES:
// <id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slot>...
type clusterNode struct {
	id    string
	addr  string
	flags []string
	// master is the id of a replica's master, "-" for a master.
	master string
	// slots: the node serves at least one slot.
	slots bool
}

func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

func clusterNodesOf(ctx context.Context, addr string) ([]clusterNode, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	return parseClusterNodes(text)
}

func parseClusterNodes(text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("malformed CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		nodes = append(nodes, clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3], slots: len(f) > 8})
	}
	return nodes, nil
}

// run runs scripts/cluster.sh with the cluster's ports and directory.
func (c *Cluster) run(timeout time.Duration, command string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", c.script, command, "--base-port", strconv.Itoa(c.base), "--dir", c.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// The daemonized nodes drop the script's stdout; should one keep it, do not wait for it.
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// clusterScript finds scripts/cluster.sh in the module root: the nearest directory above the
// working directory (a test runs in its package's) that holds go.mod.
func clusterScript(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			script := filepath.Join(dir, "scripts", "cluster.sh")
			if _, err := os.Stat(script); err != nil {
				t.Fatalf("redistest: %v", err)
			}
			return script
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("redistest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// freeRange returns a base port such that it, the next five, and their bus ports can be bound.
func freeRange(t testing.TB) int {
	t.Helper()
	for range 200 {
		base := minBase + rand.IntN(maxBase-minBase)
		if rangeFree(base) {
			return base
		}
	}
	t.Fatalf("redistest: no %d consecutive free ports in %d-%d", clusterNodes, minBase, maxBase)
	return 0
}

func rangeFree(base int) bool {
	for i := range clusterNodes {
		for _, port := range []int{base + i, base + i + busOffset} {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				return false
			}
			_ = ln.Close()
		}
	}
	return true
}

// watchdog stops the cluster when the test binary goes away, however it goes: its standard input
// is a pipe whose only writer is the test binary, so it reads end-of-file when the binary closes
// the pipe (Stop) or dies (a -timeout panic, a crash, a signal), and then runs cluster.sh stop.
// The nodes are daemons, not children, so the kernel would not kill them with the binary. The
// watchdog has its own process group, so a Ctrl-C aimed at `go test` does not stop it first.
type watchdog struct {
	cmd    *exec.Cmd
	pipe   *os.File
	once   sync.Once
	done   chan struct{}
	err    error
	output []byte
}

func startWatchdog(script string, base int, dir, logPath string) (*watchdog, error) {
	// Its output goes to a file, not a pipe to the test binary: once the binary is dead, writing to
	// that pipe would kill the watchdog before it has stopped anything.
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	cmd := exec.Command("bash", "-c", `read -r _ || true; exec bash "$0" stop --base-port "$1" --dir "$2"`,
		script, strconv.Itoa(base), dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("start the cluster's watchdog: %w", err)
	}
	wd := &watchdog{cmd: cmd, pipe: w, done: make(chan struct{})}
	go func() {
		wd.err = cmd.Wait()
		wd.output, _ = os.ReadFile(logPath)
		close(wd.done)
	}()
	return wd, nil
}

// stop closes the pipe, so the watchdog runs cluster.sh stop, and waits for it.
func (w *watchdog) stop(timeout time.Duration) ([]byte, error) {
	w.once.Do(func() { _ = w.pipe.Close() })
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-w.done:
		return w.output, w.err
	case <-timer.C:
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
		return w.output, errors.New("cluster.sh stop did not finish within " + timeout.String())
	}
}

package fleet

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// etcdServer is a real etcd of one member on free loopback ports (Debian's etcd-server,
// or API_AUTH_TEST_ETCD), its data in the test's folder, killed when the test ends.
type etcdServer struct {
	url  string
	args []string
	cmd  *exec.Cmd
	t    *testing.T
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	bin := os.Getenv("API_AUTH_TEST_ETCD")
	if bin == "" {
		bin = "/usr/bin/etcd"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the fleet's tests need etcd (Debian: apt install etcd-server, or API_AUTH_TEST_ETCD): %v", err)
	}
	dir := t.TempDir()
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	e := &etcdServer{url: client, t: t, args: []string{bin, "--name", "test", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer, "--initial-cluster", "test=" + peer, "--initial-cluster-state", "new",
		"--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap"}}
	e.start()
	t.Cleanup(e.kill)
	return e
}

func (e *etcdServer) start() {
	e.t.Helper()
	cmd := exec.Command(e.args[0], e.args[1:]...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.cmd = cmd
	ready := make(chan bool)
	go func() {
		scan := bufio.NewScanner(stderr)
		scan.Buffer(make([]byte, 1<<20), 1<<20)
		said := false
		for scan.Scan() {
			if !said && strings.Contains(scan.Text(), "serving client traffic") {
				said = true
				ready <- true
			}
		}
		if !said {
			close(ready)
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			e.t.Fatal("etcd exited before it served clients")
		}
	case <-time.After(30 * time.Second):
		e.t.Fatal("etcd did not serve clients within 30 s")
	}
}

func (e *etcdServer) kill() {
	if e.cmd != nil && e.cmd.Process != nil {
		e.cmd.Process.Signal(syscall.SIGKILL)
		e.cmd.Wait()
	}
}

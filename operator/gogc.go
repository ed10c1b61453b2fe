package operator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// GoGCPercent is the Go runtime's garbage-collection target (GOGC) the operator runs with when the
// GOGC environment variable is not set: Go's own default. (It has nothing to do with the NodeClaim
// garbage collector in controllers/garbagecollection.) The heap then grows to about twice what is
// live between collections. The operator ran at 400 before, for the webhooks' latency (OPA allocates
// heavily, and fewer collections cut the policy benchmark's p99 at 50 policies about 4x), but the
// heap grows with the cluster (the informer cache holds every pod), and at 400 it grew to five times
// that: 1.6 GiB at 10,000 pods on a machine without a container limit. Set GOGC=400 to trade memory
// for webhook latency again; the soft memory limit (TuneMemoryLimit) still bounds the heap.
const GoGCPercent = 100

// CheckGoGCPercent is the GOGC of the short-lived `joiner check` command: it allocates heavily (OPA,
// CEL) on a small live heap, so fewer collections mean shorter runs.
const CheckGoGCPercent = 400

// DefaultMemoryLimit is the Go runtime's soft memory limit when no container limit is known (outside
// a container, or a container without a limit) and GOMEMLIMIT is not set: the collector works harder
// as the heap nears it instead of letting it grow further. Karpenter's MEMORY_LIMIT (--memory-limit),
// JOINER_MEMORY_LIMIT or GOMEMLIMIT replace it.
const DefaultMemoryLimit = 1 << 30

// MemoryLimitEnv is the environment variable that holds the container's memory limit: the deployment
// (config/manager, the Helm chart) fills it from the downward API (resourceFieldRef limits.memory), in
// bytes; a quantity such as 1Gi is accepted too.
const MemoryLimitEnv = "JOINER_MEMORY_LIMIT"

// MemoryLimitDefault is the source TuneMemoryLimit reports when it set DefaultMemoryLimit.
const MemoryLimitDefault = "default"

// CgroupMemoryMax is the cgroup v2 file that holds the container's memory limit in bytes, or "max" when
// there is none.
const CgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// MemoryLimitPercent is the Go runtime's soft memory limit as a percentage of the container's limit. With
// GOGC at 400 the heap may grow to five times its live size between collections, which alone would take
// a 1 GiB container past its limit; the soft limit makes the collector run harder as the heap nears it
// instead. The remaining 10% covers what the runtime does not count (the binary's mapped text, kernel
// buffers) and the time the collector needs to catch up.
const MemoryLimitPercent = 90

// TuneGoGC sets the Go runtime's GOGC to GoGCPercent unless the GOGC environment variable says
// otherwise, and its soft memory limit as TuneMemoryLimit does.
func TuneGoGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GoGCPercent)
	}
	// A limit that cannot be read leaves the runtime without one, as before; TuneMemoryLimit reports why.
	_, _, _ = TuneMemoryLimit()
}

// TuneMemoryLimit sets the Go runtime's soft memory limit (debug.SetMemoryLimit) to MemoryLimitPercent
// of the container's memory limit, or to DefaultMemoryLimit when there is none, unless the GOMEMLIMIT
// environment variable is set (the runtime then already applies it). It returns the limit it set in
// bytes (0 when it set none), where it came from ("default" for DefaultMemoryLimit), and an error when
// a source of the container's limit could not be read; the other source is still used then.
func TuneMemoryLimit() (int64, string, error) {
	return tuneMemoryLimit(os.Getenv, CgroupMemoryMax, debug.SetMemoryLimit)
}

// tuneMemoryLimit is TuneMemoryLimit with the environment, the cgroup file and the runtime call
// injected, for tests.
func tuneMemoryLimit(getenv func(string) string, cgroupFile string, setLimit func(int64) int64) (int64, string, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, "GOMEMLIMIT", nil
	}
	container, source, err := MemoryLimit(getenv, cgroupFile)
	if container <= 0 {
		setLimit(DefaultMemoryLimit)
		return DefaultMemoryLimit, MemoryLimitDefault, err
	}
	limit := container / 100 * MemoryLimitPercent
	setLimit(limit)
	return limit, source, err
}

// MemoryLimit returns the container's memory limit in bytes and where it came from (MemoryLimitEnv, the
// path of the cgroup file, or "none"): the smaller of MemoryLimitEnv (read with getenv) and the cgroup v2
// file cgroupFile, whichever are set. The downward API reports the node's allocatable memory for a
// container without a limit, so the cgroup file, when it has a limit, is the better source then. It
// returns 0 when neither is set (no environment variable, no file, or "max"), and an error naming each
// source that could not be parsed.
func MemoryLimit(getenv func(string) string, cgroupFile string) (int64, string, error) {
	limit, source := int64(0), "none"
	var errs []error
	if v := strings.TrimSpace(getenv(MemoryLimitEnv)); v != "" {
		q, err := resource.ParseQuantity(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q: %w; set it to the container's memory limit in bytes (resourceFieldRef limits.memory)", MemoryLimitEnv, v, err))
		case q.Value() <= 0:
			errs = append(errs, fmt.Errorf("%s=%q: the memory limit must be positive", MemoryLimitEnv, v))
		default:
			limit, source = q.Value(), MemoryLimitEnv
		}
	}
	cg, err := cgroupMemoryMax(cgroupFile)
	if err != nil {
		errs = append(errs, err)
	}
	if cg > 0 && (limit == 0 || cg < limit) {
		limit, source = cg, cgroupFile
	}
	return limit, source, errors.Join(errs...)
}

// cgroupMemoryMax reads a cgroup v2 memory.max file: a number of bytes, or "max" for no limit (0). A
// missing file (no cgroup v2, or not in a container) is no limit either.
func cgroupMemoryMax(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the container memory limit: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("read the container memory limit: %s holds %q, want a positive number of bytes or \"max\"", path, v)
	}
	return n, nil
}

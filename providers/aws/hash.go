package aws

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
)

// jsonHash returns the FNV-1a hash of v's JSON encoding (maps are encoded with sorted keys, so
// equal values hash equally).
func jsonHash(v any) (uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("hash: %w", err)
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64(), nil
}

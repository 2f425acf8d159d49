package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CommandCalls reads INFO commandstats on each server of addrs and answers, by address and then by
// command (lower case, without "cmdstat_"), how many calls it has served; INFO itself, which this
// reading adds, is left out.
func CommandCalls(ctx context.Context, addrs []string) (map[string]map[string]int64, error) {
	out := make(map[string]map[string]int64, len(addrs))
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		info, err := c.Info(ctx, "commandstats").Result()
		_ = c.Close()
		if err != nil {
			return nil, fmt.Errorf("commandstats of %s: %w", addr, err)
		}
		calls := map[string]int64{}
		for line := range strings.Lines(info) {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
				continue
			}
			field, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			n, err := strconv.ParseInt(field, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("commandstats of %s: %q: %w", addr, line, err)
			}
			calls[strings.TrimPrefix(name, "cmdstat_")] += n
		}
		out[addr] = calls
	}
	return out, nil
}

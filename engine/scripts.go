package engine

import (
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// scripts holds one Lua script per Redis operation. Each file under lua/ is headed by its
// KEYS/ARGV/Output contract; common.lua's helpers are prepended to every one.
type scripts struct {
	holdSlots      *redis.Script
	expireDue      *redis.Script
	readSlots      *redis.Script
	markConfirming *redis.Script
	settleHold     *redis.Script
	unconfirm      *redis.Script
	cancelHold     *redis.Script
	giveBack       *redis.Script
	ensureOwner    *redis.Script
	loadDay        *redis.Script
	recount        *redis.Script
	regrid         *redis.Script
}

func loadScripts() *scripts {
	common := mustRead("common.lua")
	s := func(name string) *redis.Script { return redis.NewScript(common + "\n" + mustRead(name)) }
	return &scripts{
		holdSlots:      s("hold_slots.lua"),
		expireDue:      s("expire_due.lua"),
		readSlots:      s("read_slots.lua"),
		markConfirming: s("mark_confirming.lua"),
		settleHold:     s("settle_hold.lua"),
		unconfirm:      s("unconfirm.lua"),
		cancelHold:     s("cancel_hold.lua"),
		giveBack:       s("give_back.lua"),
		ensureOwner:    s("ensure_owner.lua"),
		loadDay:        s("load_day.lua"),
		recount:        s("recount.lua"),
		regrid:         s("regrid.lua"),
	}
}

func mustRead(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(fmt.Sprintf("engine: embedded script %s: %v", name, err))
	}
	return string(b)
}

// HoldScriptForBenchmark exposes the bare hold script so benchmarks can measure the engine's path
// against it in the same run.
func HoldScriptForBenchmark() *redis.Script { return loadScripts().holdSlots }

// reply reads a script's table answer as strings.
func reply(v any, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected script reply %T", v)
	}
	out := make([]string, len(arr))
	for i, x := range arr {
		switch t := x.(type) {
		case string:
			out[i] = t
		case int64:
			out[i] = fmt.Sprint(t)
		case nil:
		default:
			out[i] = fmt.Sprint(t)
		}
	}
	return out, nil
}

func joinFields(fields []string) string { return strings.Join(fields, ",") }

// isNil reports a redis nil reply.
func isNil(err error) bool { return errors.Is(err, redis.Nil) }

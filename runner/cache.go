package runner

import (
	"container/list"
	"sync"
)

// traceCache keeps the chunks of recent GPU traces, least recently used
// first out, within a byte budget.
type traceCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	order  *list.List // of *cacheEntry, most recent at the front
	byKey  map[string]*list.Element
}

type cacheEntry struct {
	key    string
	chunks [][]byte
	size   int64
}

func newTraceCache(budget int64) *traceCache {
	return &traceCache{budget: budget, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *traceCache) get(key string) ([][]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).chunks, true
}

func (c *traceCache) put(key string, chunks [][]byte, size int64) {
	if size > c.budget/4 {
		return // one trace may not crowd out the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key, chunks, size})
	c.used += size
	for c.used > c.budget {
		old := c.order.Remove(c.order.Back()).(*cacheEntry)
		delete(c.byKey, old.key)
		c.used -= old.size
	}
}

/* Relationships in changes: the targets of one relationship of an insert or an update in a
 * ubq_changes (ubq_context_relate sends one such update to a context). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static size_t count_targets(const char *const *targets) {
    size_t n = 0;
    while (targets && targets[n]) n++;
    return n;
}

static Ubiquity__V1__Insert *insert_named(const ubq_changes *c, const char *temporary_id) {
    for (size_t i = 0; i < c->n_inserts; i++)
        if (strcmp(c->inserts[i]->temporary_id, temporary_id) == 0) return c->inserts[i];
    return NULL;
}

/* ObjectRefs for `targets`: an insert's temporary ID in `c` names that insert, anything else is
 * an object ID. `refs` and `slots` have room for every target. */
static void fill_refs(const ubq_changes *c, const char *const *targets, size_t n, Ubiquity__V1__ObjectRef *refs,
                      Ubiquity__V1__ObjectRef **slots) {
    for (size_t i = 0; i < n; i++) {
        ubiquity__v1__object_ref__init(&refs[i]);
        if (c && insert_named(c, targets[i])) {
            refs[i].ref_case = UBIQUITY__V1__OBJECT_REF__REF_TEMPORARY_ID;
            refs[i].temporary_id = (char *)targets[i];
        } else {
            refs[i].ref_case = UBIQUITY__V1__OBJECT_REF__REF_OBJECT_ID;
            refs[i].object_id = (char *)targets[i];
        }
        slots[i] = &refs[i];
    }
}

/* Replaces *slot (an Insert or an Update owned by the changes) with a copy whose relationship
 * `name` is `targets`. The relationships map is found by offset: Insert and Update both have one,
 * with entries of the same layout (ubq__entry). */
static void set_relationship(ProtobufCMessage **slot, size_t n_offset, size_t list_offset,
                             const ProtobufCMessageDescriptor *entry_d, const ubq_changes *c, const char *name,
                             const char *const *targets) {
    ProtobufCMessage *m = *slot;
    size_t *n = (size_t *)(void *)((char *)m + n_offset);
    ubq__entry ***list = (ubq__entry ***)(void *)((char *)m + list_offset);
    size_t n_targets = count_targets(targets);
    Ubiquity__V1__ObjectRef *refs = ubq__xcalloc(n_targets ? n_targets : 1, sizeof *refs);
    Ubiquity__V1__ObjectRef **slots = ubq__xcalloc(n_targets ? n_targets : 1, sizeof *slots);
    fill_refs(c, targets, n_targets, refs, slots);
    Ubiquity__V1__ObjectRefList value = UBIQUITY__V1__OBJECT_REF_LIST__INIT;
    value.refs = slots;
    value.n_refs = n_targets;
    ubq__entry entry;
    protobuf_c_message_init(entry_d, &entry);
    entry.key = (char *)name;
    entry.value = &value;
    ubq__entry **entries = ubq__xcalloc(*n + 1, sizeof *entries);
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i]->key, name) != 0) entries[k++] = (*list)[i];  /* a second call replaces the first */
    entries[k++] = &entry;
    /* Lend the message the new map for the copy, then give it its own back before freeing it. */
    ubq__entry **own = *list;
    size_t own_n = *n;
    *list = entries;
    *n = k;
    ProtobufCMessage *copy = ubq__copy_message(m);
    *list = own;
    *n = own_n;
    ubq_message_free(m);
    *slot = copy;
    free(entries);
    free(slots);
    free(refs);
}

void ubq_changes_relate(ubq_changes *c, const char *from, const char *name, const char *const *targets) {
    for (size_t i = 0; i < c->n_inserts; i++)
        if (strcmp(c->inserts[i]->temporary_id, from) == 0) {
            set_relationship((ProtobufCMessage **)&c->inserts[i], offsetof(Ubiquity__V1__Insert, n_relationships),
                             offsetof(Ubiquity__V1__Insert, relationships),
                             &ubiquity__v1__insert__relationships_entry__descriptor, c, name, targets);
            return;
        }
    size_t u = 0;
    while (u < c->n_updates && strcmp(c->updates[u]->object_id, from) != 0) u++;
    if (u == c->n_updates) ubq_changes_update(c, from, NULL, -1);  /* an existing object: an update of its own */
    set_relationship((ProtobufCMessage **)&c->updates[u], offsetof(Ubiquity__V1__Update, n_relationships),
                     offsetof(Ubiquity__V1__Update, relationships), &ubiquity__v1__update__relationships_entry__descriptor,
                     c, name, targets);
}

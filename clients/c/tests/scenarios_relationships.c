/* Relationships in saves and contexts: a Note's to-one `owner` and a Person's to-many `notes`,
 * inverses of each other — set on inserts by temporary ID, moved on an existing object, and set
 * through a context to a pending insert; read back through predicates and the objects' maps. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

static ubq_error *register_notes_model(ubq_store *s) {
    Ubiquity__V1__Attribute name = UBIQUITY__V1__ATTRIBUTE__INIT, text = UBIQUITY__V1__ATTRIBUTE__INIT;
    name.name = "name"; name.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_STRING;
    text.name = "text"; text.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_STRING;
    Ubiquity__V1__Relationship notes = UBIQUITY__V1__RELATIONSHIP__INIT, owner = UBIQUITY__V1__RELATIONSHIP__INIT;
    notes.name = "notes"; notes.destination = "Note"; notes.to_many = true; notes.inverse = "owner";
    owner.name = "owner"; owner.destination = "Person"; owner.inverse = "notes";
    Ubiquity__V1__Attribute *person_attrs[] = {&name}, *note_attrs[] = {&text};
    Ubiquity__V1__Relationship *person_rels[] = {&notes}, *note_rels[] = {&owner};
    Ubiquity__V1__Entity person = UBIQUITY__V1__ENTITY__INIT, note = UBIQUITY__V1__ENTITY__INIT;
    person.name = "Person"; person.attributes = person_attrs; person.n_attributes = 1;
    person.relationships = person_rels; person.n_relationships = 1;
    note.name = "Note"; note.attributes = note_attrs; note.n_attributes = 1;
    note.relationships = note_rels; note.n_relationships = 1;
    Ubiquity__V1__Entity *entities[] = {&person, &note};
    Ubiquity__V1__Model model = UBIQUITY__V1__MODEL__INIT;
    model.version_identifier = "notes-v1";
    model.entities = entities;
    model.n_entities = 2;
    return ubq_register_model(s, &model, NULL);
}

/* The targets of relationship `name` of `o` (NULL if the map has no such entry). */
static const Ubiquity__V1__ObjectIDList *targets_of(const Ubiquity__V1__ManagedObject *o, const char *name) {
    for (size_t i = 0; o && i < o->n_relationships; i++)
        if (strcmp(o->relationships[i]->key, name) == 0) return o->relationships[i]->value;
    return NULL;
}

/* The one Note owned by the Person named `owner`, or NULL (*out: the results, the caller's). */
static const Ubiquity__V1__ManagedObject *note_of(ubq_store *s, const char *owner, Ubiquity__V1__FetchResults **out) {
    ubq_values *args = ubq_values_string(ubq_values_new(), "who", owner);
    ubq_error *e = ubq_fetch(s, "Note", &(ubq_fetch_options){.predicate = "owner.name == $who", .arguments = args}, out);
    ubq_values_free(args);
    if (e) { ubq_error_free(e); *out = NULL; return NULL; }
    return (*out)->n_objects == 1 ? (*out)->objects[0] : NULL;
}

static void test_relationships_set_by_temporary_id_moved_and_set_in_a_context(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_context *ctx = NULL;
    ubq_changes *first = ubq_changes_new(), *move = ubq_changes_new();
    ubq_values *ann = ubq_values_string(ubq_values_new(), "name", "Ann");
    ubq_values *bob = ubq_values_string(ubq_values_new(), "name", "Bob");
    ubq_values *hi = ubq_values_string(ubq_values_new(), "text", "hi");
    ubq_values *draft = ubq_values_string(ubq_values_new(), "text", "draft");
    ubq_values *final = ubq_values_string(ubq_values_new(), "text", "final");
    Ubiquity__V1__SaveResult *saved = NULL;
    Ubiquity__V1__FetchResults *of_ann = NULL, *of_bob = NULL, *people = NULL;
    char *pending = NULL, store_name[64], uuid[37];
    ubq__uuid(uuid);
    snprintf(store_name, sizeof store_name, "relationships-%s", uuid);
    OK(ubq_open_store(c, store_name, false, &s));
    OK(register_notes_model(s));
    ubq_changes_insert(first, "ann", "Person", ann);
    ubq_changes_insert(first, "bob", "Person", bob);
    ubq_changes_insert(first, "n1", "Note", hi);
    const char *to_ann[] = {"ann", NULL};
    ubq_changes_relate(first, "n1", "owner", to_ann);
    OK(ubq_save(s, first, NULL, &saved));
    const char *ann_id = ubq_permanent_id(saved, "ann"), *bob_id = ubq_permanent_id(saved, "bob");
    const char *n1_id = ubq_permanent_id(saved, "n1");
    const Ubiquity__V1__ManagedObject *n = note_of(s, "Ann", &of_ann);
    CHECK(n && strcmp(n->object_id, n1_id) == 0);
    const Ubiquity__V1__ObjectIDList *owner = targets_of(n, "owner");
    CHECK(owner && owner->n_object_ids == 1 && strcmp(owner->object_ids[0], ann_id) == 0);
    ubq_message_free(of_ann);
    of_ann = NULL;

    /* an existing note moves to Bob: an update of its relationship alone */
    const char *to_bob[] = {bob_id, NULL};
    ubq_changes_relate(move, n1_id, "owner", to_bob);
    OK(ubq_save(s, move, NULL, NULL));
    CHECK(note_of(s, "Bob", &of_bob) != NULL && note_of(s, "Ann", &of_ann) == NULL);
    ubq_message_free(of_ann);
    of_ann = NULL;

    /* through a context: Ann's notes set to a pending note before the save (the inverse, the
     * note's owner, follows), and the pending note's text changed through the context */
    OK(ubq_context_create(s, NULL, &ctx));
    OK(ubq_context_insert(ctx, "Note", draft, &pending));
    const char *the_draft[] = {pending, NULL};
    OK(ubq_context_relate(ctx, ann_id, "notes", the_draft));
    OK(ubq_context_update(ctx, pending, final));
    OK(ubq_context_save(ctx, NULL, NULL));
    n = note_of(s, "Ann", &of_ann);
    CHECK(n && strcmp(string_of(n, "text"), "final") == 0);
    /* and Ann's notes are the draft only */
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.predicate = "name == 'Ann'"}, &people));
    const Ubiquity__V1__ObjectIDList *notes = people->n_objects == 1 ? targets_of(people->objects[0], "notes") : NULL;
    CHECK(notes && notes->n_object_ids == 1 && n && strcmp(notes->object_ids[0], n->object_id) == 0);
done:
    free(pending);
    ubq_context_close(ctx);
    ubq_message_free(people);
    ubq_message_free(of_bob);
    ubq_message_free(of_ann);
    ubq_message_free(saved);
    ubq_values_free(final);
    ubq_values_free(draft);
    ubq_values_free(hi);
    ubq_values_free(bob);
    ubq_values_free(ann);
    ubq_changes_free(move);
    ubq_changes_free(first);
    if (s) ubq_error_free(ubq_destroy_store(s));
    ubq_store_free(s);
}

const scenario relationship_scenarios[] = {
#define T(f) {#f, f}
    T(test_relationships_set_by_temporary_id_moved_and_set_in_a_context),
#undef T
    {NULL, NULL}};

/* What the scenario files share: the Person model, a fresh store per test, small helpers. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

int failed_checks;
const char *workdir;
test_server *shared_server;

/* Person: name (required), age int32, email (unique), score double — the Python suite's model. */
ubq_error *register_person_model(ubq_store *s) {
    Ubiquity__V1__Attribute name = UBIQUITY__V1__ATTRIBUTE__INIT, age = UBIQUITY__V1__ATTRIBUTE__INIT,
                            email = UBIQUITY__V1__ATTRIBUTE__INIT, score = UBIQUITY__V1__ATTRIBUTE__INIT;
    name.name = "name"; name.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_STRING; name.required = true;
    age.name = "age"; age.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_INT32;
    email.name = "email"; email.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_STRING;
    score.name = "score"; score.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_DOUBLE;
    Ubiquity__V1__Attribute *attrs[] = {&name, &age, &email, &score};
    char *unique_props[] = {"email"};
    Ubiquity__V1__PropertyList unique = UBIQUITY__V1__PROPERTY_LIST__INIT;
    unique.properties = unique_props;
    unique.n_properties = 1;
    Ubiquity__V1__PropertyList *uniques[] = {&unique};
    Ubiquity__V1__Entity person = UBIQUITY__V1__ENTITY__INIT;
    person.name = "Person";
    person.attributes = attrs;
    person.n_attributes = 4;
    person.uniqueness_constraints = uniques;
    person.n_uniqueness_constraints = 1;
    Ubiquity__V1__Entity *entities[] = {&person};
    Ubiquity__V1__Model model = UBIQUITY__V1__MODEL__INIT;
    model.version_identifier = "v1";
    model.entities = entities;
    model.n_entities = 1;
    return ubq_register_model(s, &model, NULL);
}

ubq_error *new_store(ubq_client *c, const char *prefix, ubq_store **out) {
    char name[128], id[37];
    ubq__uuid(id);
    snprintf(name, sizeof name, "%s-%s", prefix, id);
    ubq_error *err = ubq_open_store(c, name, false, out);
    if (err) return err;
    err = register_person_model(*out);
    if (err) { ubq_store_free(*out); *out = NULL; }
    return err;
}

/* Inserts one Person and returns its permanent ID (malloc'd). */
ubq_error *add_person(ubq_store *s, const char *name, int age, const char *email, double score, char **id) {
    ubq_values *v = ubq_values_new();
    ubq_values_string(v, "name", name);
    if (age >= 0) ubq_values_int32(v, "age", age);
    if (email) ubq_values_string(v, "email", email);
    if (score >= 0) ubq_values_double(v, "score", score);
    ubq_changes *ch = ubq_changes_new();
    ubq_changes_insert(ch, "p", "Person", v);
    Ubiquity__V1__SaveResult *r = NULL;
    ubq_error *err = ubq_save(s, ch, NULL, &r);
    ubq_changes_free(ch);
    ubq_values_free(v);
    if (err) return err;
    if (id) *id = ubq__xstrdup(ubq_permanent_id(r, "p"));
    ubq_message_free(r);
    return NULL;
}

ubq_error *update_person(ubq_store *s, const char *id, ubq_values *v) {
    ubq_changes *ch = ubq_changes_new();
    ubq_changes_update(ch, id, v, -1);
    ubq_error *err = ubq_save(s, ch, NULL, NULL);
    ubq_changes_free(ch);
    ubq_values_free(v);
    return err;
}

int64_t int_of(const Ubiquity__V1__ManagedObject *o, const char *key) {
    int64_t x = -1;
    if (!o || !ubq_value_int(UBQ_GET(o, values, key), &x)) return -1;
    return x;
}

const char *string_of(const Ubiquity__V1__ManagedObject *o, const char *key) {
    const char *s = o ? ubq_value_string(UBQ_GET(o, values, key)) : NULL;
    return s ? s : "";
}

/* The age of `id` read through GetObjects at `at` (NULL: current); -1 if missing. */
int64_t age_at(ubq_store *s, const char *id, const ProtobufCBinaryData *at) {
    Ubiquity__V1__GetObjectsResponse *r = NULL;
    ubq_error *err = ubq_get_objects(s, &id, 1, at, &r);
    if (err) { ubq_error_free(err); return -1; }
    int64_t age = int_of(ubq_find_object(r, id), "age");
    ubq_message_free(r);
    return age;
}


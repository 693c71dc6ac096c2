import Foundation

/// Value checks that need only the model and the configuration (no store state).
struct ValueChecker {
    let model: ResolvedModel
    let config: StorageConfiguration

        func checkValues(_ entity: String, _ values: [String: StorageValue], object: String?,
                         attributes: [String: AttributeDefinition]? = nil, into issues: inout [ValidationIssue]) {
            let attrs = attributes ?? model.attributes[entity]!
            let before = issues.count
            defer { Self.sortByProperty(&issues, from: before) }
            for (k, v) in values {
                guard let a = attrs[k] else { unknownAttribute(entity, k, object: object, into: &issues); continue }
                checkValue(entity, k, v, a, object: object, into: &issues)
            }
        }

        /// `checkValues` for an insert of `ent`: also puts each known attribute's value in its slot.
        func checkValues(_ ent: InsertEntity, _ entity: String, _ values: [String: StorageValue], object: String,
                         slots: inout [StorageValue?], into issues: inout [ValidationIssue]) {
            let before = issues.count
            defer { Self.sortByProperty(&issues, from: before) }
            for (k, v) in values {
                guard let i = ent.slotIndex(k) else { unknownAttribute(entity, k, object: object, into: &issues); continue }
                slots[i] = v
                if ent.passesCheck(i, v, maxValueBytes: config.maxValueBytes) { continue }
                checkValue(entity, k, v, ent.slotAttributes[i], object: object, into: &issues)
            }
        }

        /// Issues come out in property-name order (each property's issues stay together in the
        /// order they were found), without sorting every object's values first.
        static func sortByProperty(_ issues: inout [ValidationIssue], from before: Int) {
            if issues.count > before + 1 {
                let mine = issues[before...].enumerated().sorted { a, b in
                    let (ka, kb) = (a.element.property ?? "", b.element.property ?? "")
                    return ka != kb ? ka < kb : a.offset < b.offset
                }.map(\.element)
                issues.replaceSubrange(before..., with: mine)
            }
        }

        func unknownAttribute(_ entity: String, _ k: String, object: String?, into issues: inout [ValidationIssue]) {
            // a name from the request, echoed back: at most 40 characters of it
            let name = k.count > 40 ? k.prefix(40) + "…" : k
            issues.append(ValidationIssue(.unknownProperty, object: object, entity: entity, property: name,
                                          model.relationships[entity]![k] != nil ? "\(k) is a relationship: set it through relationships" : "\(entity) has no attribute \(name)"))
        }

        /// One attribute value's type, size and bound checks.
        func checkValue(_ entity: String, _ k: String, _ v: StorageValue, _ a: borrowing AttributeDefinition, object: String?, into issues: inout [ValidationIssue]) {
                if v.isNull {
                    if !a.optional { issues.append(ValidationIssue(.missingRequired, object: object, entity: entity, property: k, "\(k) is required")) }
                    return
                }
                if let err = ResolvedModel.typeError(a, v) {
                    issues.append(ValidationIssue(err.contains("range") ? .outOfRange : .wrongType, object: object, entity: entity, property: k, err)); return
                }
                var size: Int?
                switch v {
                case .string(let s), .uri(let s): size = s.utf8.count
                case .binary(let d): size = d.count
                default: break
                }
                if let size, size > config.maxValueBytes {
                    issues.append(ValidationIssue(.tooLarge, object: object, entity: entity, property: k, "\(size) bytes exceeds the limit of \(config.maxValueBytes)")); return
                }
                if a.minimum == nil && a.maximum == nil { return }  // no bound: nothing to measure (string length counts characters, which is slow)
                var measure: Double?
                switch v {
                case .string(let s): measure = Double(s.count)
                case .binary(let d): measure = Double(d.count)
                case .int(let i): measure = Double(i)
                case .double(let d), .date(let d): measure = d
                case .decimal(let s): measure = Double(s)
                default: break
                }
                if let m = measure {
                    let what = (a.type == .string || a.type == .binary) ? "length " : ""
                    if let lo = a.minimum, m < lo { issues.append(ValidationIssue(.belowMinimum, object: object, entity: entity, property: k, "\(what)\(m) < minimum \(lo)")) }
                    if let hi = a.maximum, m > hi { issues.append(ValidationIssue(.aboveMaximum, object: object, entity: entity, property: k, "\(what)\(m) > maximum \(hi)")) }
                }
        }

        func checkRelationshipNames(_ entity: String, _ rels: [String: [ObjectReference]], object: String, into issues: inout [ValidationIssue]) {
            for (k, v) in rels.sorted(by: { $0.key < $1.key }) {
                guard let r = model.relationships[entity]![k] else {
                    issues.append(ValidationIssue(.unknownProperty, object: object, entity: entity, property: k, "\(entity) has no relationship \(k)")); continue
                }
                if !r.toMany && v.count > 1 { issues.append(ValidationIssue(.tooManyObjects, object: object, entity: entity, property: k, "to-one relationship given \(v.count) objects")) }
            }
        }
}

import Foundation
import SwiftProtobuf
import UbiquityGRPC
import UbiquityProtos

/// Server reflection, `grpc.reflection.v1` and `grpc.reflection.v1alpha` (Python's grpcio-reflection
/// speaks only v1alpha; other tools try v1 first). The two versions are the same messages with the
/// same field numbers, so one implementation serves both paths.
public struct ReflectionService: Sendable {
    typealias Request = Grpc_Reflection_V1_ServerReflectionRequest
    typealias Response = Grpc_Reflection_V1_ServerReflectionResponse

    private let files: [String: Google_Protobuf_FileDescriptorProto]
    private let serialized: [String: Data]
    private let fileOfSymbol: [String: String]
    private let services: @Sendable () -> [String]

    /// `services` lists the services to advertise (those the router serves).
    public init(services: @escaping @Sendable () -> [String]) throws {
        let data = Data(base64Encoded: EmbeddedDescriptors.fileDescriptorSetBase64, options: .ignoreUnknownCharacters) ?? Data()
        let set = try Google_Protobuf_FileDescriptorSet(serializedBytes: data)
        var files: [String: Google_Protobuf_FileDescriptorProto] = [:]
        var serialized: [String: Data] = [:]
        var symbols: [String: String] = [:]
        for file in set.file {
            files[file.name] = file
            serialized[file.name] = try file.serializedData()
            let prefix = file.package.isEmpty ? "" : file.package + "."
            func addMessage(_ m: Google_Protobuf_DescriptorProto, _ scope: String) {
                let full = scope + m.name
                symbols[full] = file.name
                for nested in m.nestedType { addMessage(nested, full + ".") }
                for e in m.enumType { symbols[full + "." + e.name] = file.name }
                for ext in m.extension { symbols[full + "." + ext.name] = file.name }
            }
            for m in file.messageType { addMessage(m, prefix) }
            for e in file.enumType { symbols[prefix + e.name] = file.name }
            for ext in file.extension { symbols[prefix + ext.name] = file.name }
            for s in file.service {
                symbols[prefix + s.name] = file.name
                for m in s.method { symbols[prefix + s.name + "." + m.name] = file.name }
            }
        }
        self.files = files
        self.serialized = serialized
        self.fileOfSymbol = symbols
        self.services = services
    }

    public func register(into router: inout Router) {
        for service in ["grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"] {
            router.register(service: service) { t in
                t.bidirectional("ServerReflectionInfo", serverReflectionInfo)
            }
        }
    }

    /// Answers each request in order on the one stream.
    func serverReflectionInfo(_ requests: RequestStream<Request>, writer: ResponseWriter<Response>, call: ServerCall) async throws {
        for try await request in requests {
            try await writer.write(answer(request))
        }
    }

    func answer(_ request: Request) -> Response {
        var response = Response()
        response.validHost = request.host
        response.originalRequest = request
        switch request.messageRequest {
        case .listServices:
            var list = Grpc_Reflection_V1_ListServiceResponse()
            list.service = services().sorted().map { name in
                var s = Grpc_Reflection_V1_ServiceResponse()
                s.name = name
                return s
            }
            response.listServicesResponse = list
        case .fileByFilename(let name):
            if files[name] != nil {
                response.fileDescriptorResponse = fileResponse(name)
            } else {
                response.errorResponse = error(.notFound, "file not found: \(name)")
            }
        case .fileContainingSymbol(let symbol):
            let trimmed = symbol.hasPrefix(".") ? String(symbol.dropFirst()) : symbol
            if let file = fileOfSymbol[trimmed] {
                response.fileDescriptorResponse = fileResponse(file)
            } else {
                response.errorResponse = error(.notFound, "symbol not found: \(symbol)")
            }
        case .fileContainingExtension(let ext):
            response.errorResponse = error(.notFound, "extension not found: \(ext.containingType) field \(ext.extensionNumber)")
        case .allExtensionNumbersOfType(let type):
            if fileOfSymbol[type] != nil {
                var numbers = Grpc_Reflection_V1_ExtensionNumberResponse()
                numbers.baseTypeName = type
                response.allExtensionNumbersResponse = numbers
            } else {
                response.errorResponse = error(.notFound, "type not found: \(type)")
            }
        case nil:
            response.errorResponse = error(.invalidArgument, "empty reflection request: set one of list_services, file_by_filename, file_containing_symbol, file_containing_extension, all_extension_numbers_of_type")
        }
        return response
    }

    /// The file followed by its transitive dependencies, each once.
    private func fileResponse(_ name: String) -> Grpc_Reflection_V1_FileDescriptorResponse {
        var order: [String] = []
        var seen = Set<String>()
        func visit(_ n: String) {
            guard !seen.contains(n), let f = files[n] else { return }
            seen.insert(n)
            order.append(n)
            for dep in f.dependency { visit(dep) }
        }
        visit(name)
        var r = Grpc_Reflection_V1_FileDescriptorResponse()
        r.fileDescriptorProto = order.compactMap { serialized[$0] }
        return r
    }

    private func error(_ code: StatusCode, _ message: String) -> Grpc_Reflection_V1_ErrorResponse {
        var e = Grpc_Reflection_V1_ErrorResponse()
        e.errorCode = Int32(code.rawValue)
        e.errorMessage = message
        return e
    }
}

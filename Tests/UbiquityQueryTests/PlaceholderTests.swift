import XCTest
@testable import UbiquityQuery

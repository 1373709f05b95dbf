using Microsoft.CodeAnalysis;

namespace Calc.Generators;

/// <summary>Emits <c>Calc.CalcInfo.Name</c> into the project that references this generator.</summary>
[Generator]
public sealed class CalcInfoGenerator : IIncrementalGenerator
{
    public void Initialize(IncrementalGeneratorInitializationContext context)
    {
        context.RegisterPostInitializationOutput(static output => output.AddSource(
            "CalcInfo.g.cs",
            "namespace Calc;\n\npublic static class CalcInfo\n{\n    public const string Name = \"Calc\";\n}\n"));
    }
}
